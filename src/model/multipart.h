// multipart/form-data (RFC 7578), read as it arrives: a body of any size in
// bounded memory (what is held is a part's headers, at most 8 KiB, and the
// few bytes that might begin a delimiter). E2B's POST /files sends its files
// so; the server writes each part to its file while the body comes in.
//
//   std::unique_ptr<MultipartReader> r;
//   if (!MultipartReader::Create(content_type, /*max_parts=*/64, &r, &why)) refuse(400, why);
//   struct Sink : MultipartReader::Handler { ... } sink;
//   for each piece of the body: if (!r->Feed(piece, sink)) refuse(400, r->error());
//   if (!r->Finish(sink)) refuse(400, r->error());   // the closing delimiter is missing
//
// Pure code, no I/O: fuzzed with the request parsers (tests/fuzz).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::model {

struct MultipartPartInfo {
  std::string name;      // Content-Disposition name ("" when absent)
  std::string filename;  // Content-Disposition filename ("" when absent)
};

class MultipartReader {
 public:
  // What the reader finds, in order: OnPartBegin, OnPartData (zero or more
  // pieces of the part's bytes), OnPartEnd, for each part. A handler that
  // returns false stops the reader (Feed and Finish return false; error()
  // is then the handler's `why`, set through Stop()).
  class Handler {
   public:
    virtual ~Handler() = default;
    virtual bool OnPartBegin(const MultipartPartInfo& part) = 0;
    virtual bool OnPartData(std::string_view bytes) = 0;
    virtual bool OnPartEnd() = 0;
  };

  // The boundary comes from `content_type` (which must be multipart/form-data;
  // 1 to 70 characters). False with *error (for a 400) otherwise.
  static bool Create(std::string_view content_type, size_t max_parts, std::unique_ptr<MultipartReader>* out,
                     std::string* error);

  // The next piece of the body. False when it is malformed (error() says how)
  // or a handler stopped.
  bool Feed(std::string_view bytes, Handler& handler);
  // The body ended: false unless the closing delimiter was seen.
  bool Finish(Handler& handler);
  // Why a handler stopped the reader (call from a handler before returning false).
  void Stop(std::string why) { error_ = std::move(why); }

  const std::string& error() const { return error_; }
  size_t parts() const { return parts_; }
  // Bytes held now (a part's headers, or what may begin a delimiter).
  size_t buffered() const { return buf_.size(); }

 private:
  enum class State { kPreamble, kAfterDelimiter, kHeaders, kData, kEpilogue, kFailed };
  MultipartReader(std::string boundary, size_t max_parts);
  bool Fail(std::string why);
  bool Run(Handler& handler);

  const std::string delimiter_;  // "\r\n--" + boundary
  const size_t max_parts_;
  State state_ = State::kPreamble;
  // Unconsumed bytes. The body is read as if it began with CRLF, so that a
  // delimiter at its very start is found like every later one.
  std::string buf_ = "\r\n";
  size_t parts_ = 0;
  std::string error_;
};

// One part of a whole multipart/form-data body (ParseMultipartFormData).
struct MultipartPart {
  std::string name;
  std::string filename;
  std::string body;
};
// A whole body through MultipartReader: the parts, in order. At most
// `max_parts` parts; headers of a part at most 8 KiB. False with *error (what
// is wrong, for a 400) on a missing boundary, a missing closing delimiter or
// a malformed part. Linear in the body's size.
bool ParseMultipartFormData(std::string_view content_type, std::string_view body, size_t max_parts,
                            std::vector<MultipartPart>* parts, std::string* error);

}  // namespace airlock::model
