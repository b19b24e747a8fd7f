#include "model/multipart.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace airlock::model {
namespace {

constexpr size_t kMaxHeaderBytes = 8192;
constexpr size_t kMaxBoundarySpace = 64;  // white space allowed after a delimiter

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IEqualsPrefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

// The value of parameter `key` in a header value's `; key=value` list
// (quoted or not); nullopt when absent.
std::optional<std::string> HeaderParam(std::string_view value, std::string_view key) {
  size_t pos = value.find(';');
  while (pos != std::string_view::npos) {
    std::string_view rest = Trim(value.substr(pos + 1));
    size_t eq = rest.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::string_view name = Trim(rest.substr(0, eq));
    std::string_view v = rest.substr(eq + 1);
    std::string out;
    size_t consumed = 0;
    if (!v.empty() && v.front() == '"') {
      size_t i = 1;
      for (; i < v.size() && v[i] != '"'; ++i) {
        if (v[i] == '\\' && i + 1 < v.size()) ++i;
        out.push_back(v[i]);
      }
      if (i >= v.size()) return std::nullopt;  // unterminated quote
      consumed = i + 1;
    } else {
      size_t semi = v.find(';');
      out = std::string(Trim(v.substr(0, semi)));
      consumed = semi == std::string_view::npos ? v.size() : semi;
    }
    if (name.size() == key.size() && IEqualsPrefix(name, key)) return out;
    size_t next = v.substr(consumed).find(';');
    if (next == std::string_view::npos) return std::nullopt;
    pos = static_cast<size_t>((v.data() + consumed + next) - value.data());
  }
  return std::nullopt;
}

MultipartPartInfo ParsePartHeaders(std::string_view headers) {
  MultipartPartInfo part;
  while (!headers.empty()) {
    size_t eol = headers.find("\r\n");
    std::string_view line = headers.substr(0, eol);
    headers = eol == std::string_view::npos ? std::string_view() : headers.substr(eol + 2);
    if (IEqualsPrefix(line, "content-disposition:")) {
      std::string_view v = line.substr(20);
      if (auto n = HeaderParam(v, "name")) part.name = *n;
      if (auto f = HeaderParam(v, "filename")) part.filename = *f;
    }
  }
  return part;
}

}  // namespace

bool MultipartReader::Create(std::string_view content_type, size_t max_parts, std::unique_ptr<MultipartReader>* out,
                             std::string* error) {
  if (!IEqualsPrefix(Trim(content_type), "multipart/form-data")) {
    *error = "Content-Type must be multipart/form-data (field 'file') or application/octet-stream";
    return false;
  }
  std::optional<std::string> boundary = HeaderParam(content_type, "boundary");
  if (!boundary || boundary->empty() || boundary->size() > 70) {
    *error = "multipart/form-data without a valid boundary parameter (1 to 70 characters)";
    return false;
  }
  out->reset(new MultipartReader(*boundary, max_parts));
  return true;
}

MultipartReader::MultipartReader(std::string boundary, size_t max_parts)
    : delimiter_("\r\n--" + boundary), max_parts_(max_parts) {}

bool MultipartReader::Fail(std::string why) {
  if (state_ != State::kFailed && error_.empty()) error_ = std::move(why);
  if (error_.empty()) error_ = "the multipart body was refused";
  state_ = State::kFailed;
  buf_.clear();
  return false;
}

bool MultipartReader::Feed(std::string_view bytes, Handler& handler) {
  if (state_ == State::kFailed) return false;
  if (state_ == State::kEpilogue) return true;  // after the closing delimiter: ignored
  buf_.append(bytes);
  return Run(handler);
}

bool MultipartReader::Finish(Handler& handler) {
  (void)handler;
  if (state_ == State::kFailed) return false;
  if (state_ == State::kEpilogue) return true;
  return Fail(state_ == State::kPreamble ? "multipart body without its boundary"
                                         : "malformed multipart body: the closing boundary is missing");
}

bool MultipartReader::Run(Handler& handler) {
  auto stopped = [&] { return Fail(""); };
  while (true) {
    switch (state_) {
      case State::kFailed:
        return false;
      case State::kEpilogue:
        buf_.clear();
        return true;
      case State::kPreamble:
      case State::kData: {
        size_t at = buf_.find(delimiter_);
        if (at == std::string::npos) {
          // What may begin a delimiter stays; the rest is the part's (or the
          // preamble's, dropped).
          size_t keep = std::min(buf_.size(), delimiter_.size() - 1);
          size_t emit = buf_.size() - keep;
          if (state_ == State::kData && emit > 0 && !handler.OnPartData(std::string_view(buf_).substr(0, emit))) {
            return stopped();
          }
          buf_.erase(0, emit);
          return true;
        }
        if (state_ == State::kData) {
          if (at > 0 && !handler.OnPartData(std::string_view(buf_).substr(0, at))) return stopped();
          if (!handler.OnPartEnd()) return stopped();
        }
        buf_.erase(0, at + delimiter_.size());
        state_ = State::kAfterDelimiter;
        break;
      }
      case State::kAfterDelimiter: {
        if (buf_.size() < 2) return true;
        if (buf_.compare(0, 2, "--") == 0) {
          state_ = State::kEpilogue;
          break;
        }
        // Linear white space may follow a delimiter, then CRLF opens a part.
        size_t i = 0;
        while (i < buf_.size() && (buf_[i] == ' ' || buf_[i] == '\t')) ++i;
        if (i > kMaxBoundarySpace) return Fail("malformed multipart body: a boundary is followed by white space");
        if (buf_.size() < i + 2) return true;
        if (buf_.compare(i, 2, "\r\n") != 0) {
          return Fail("malformed multipart body: a boundary is not followed by CRLF");
        }
        buf_.erase(0, i + 2);
        state_ = State::kHeaders;
        break;
      }
      case State::kHeaders: {
        std::string_view headers;
        size_t consumed = 0;
        if (buf_.size() < 2) return true;
        if (buf_.compare(0, 2, "\r\n") == 0) {
          consumed = 2;  // a part with no header at all: the empty line right away
        } else {
          size_t end = buf_.find("\r\n\r\n");
          if (end == std::string::npos || end > kMaxHeaderBytes) {
            if (end == std::string::npos && buf_.size() <= kMaxHeaderBytes + 3) return true;
            return Fail("malformed multipart body: a part's headers do not end (or are over 8 KiB)");
          }
          headers = std::string_view(buf_).substr(0, end);
          consumed = end + 4;
        }
        if (parts_ >= max_parts_) return Fail("multipart body with more than " + std::to_string(max_parts_) + " parts");
        ++parts_;
        MultipartPartInfo info = ParsePartHeaders(headers);
        buf_.erase(0, consumed);
        state_ = State::kData;
        if (!handler.OnPartBegin(info)) return stopped();
        break;
      }
    }
  }
}

bool ParseMultipartFormData(std::string_view content_type, std::string_view body, size_t max_parts,
                            std::vector<MultipartPart>* parts, std::string* error) {
  parts->clear();
  std::unique_ptr<MultipartReader> reader;
  if (!MultipartReader::Create(content_type, max_parts, &reader, error)) return false;
  struct Collect : MultipartReader::Handler {
    std::vector<MultipartPart>* parts;
    bool OnPartBegin(const MultipartPartInfo& p) override {
      parts->push_back({p.name, p.filename, ""});
      return true;
    }
    bool OnPartData(std::string_view bytes) override {
      parts->back().body.append(bytes);
      return true;
    }
    bool OnPartEnd() override { return true; }
  } collect;
  collect.parts = parts;
  if (!reader->Feed(body, collect) || !reader->Finish(collect)) {
    *error = reader->error();
    parts->clear();
    return false;
  }
  return true;
}

}  // namespace airlock::model
