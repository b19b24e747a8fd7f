// Where uploads go as they arrive (BodyPolicy::kUpload; Exchange::ReadBodyInto
// feeds them a piece at a time on a worker): never held whole. Each file is
// written beneath a sandbox's directory with isolation::SandboxFileWriter
// (a temporary file renamed over its name once complete: a failed or
// abandoned upload leaves nothing), under the --max-file cap.
//
//   auto sink = std::make_shared<FileSink>(std::move(writer), max_file_bytes);
//   ex->ReadBodyInto(sink, [](Status st) { ... sink->size() ... });
//
// A body sent with Content-Encoding: gzip goes through a GzipSink first:
//   ex->ReadBodyInto(std::make_shared<GzipSink>(sink, max_file_bytes), ...);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/exchange.h"
#include "base/unique_fd.h"
#include "isolation/sandbox_files.h"
#include "model/gzip_inflate.h"
#include "model/multipart.h"

namespace airlock::api {

// The body is the file's bytes (a session's PUT, E2B's raw POST /files).
class FileSink : public BodySink {
 public:
  FileSink(std::unique_ptr<isolation::SandboxFileWriter> writer, int64_t max_bytes)
      : writer_(std::move(writer)), max_bytes_(max_bytes) {}
  Status Write(std::string_view bytes) override;
  Status Finish() override;  // commits the file under its name
  int64_t size() const { return writer_ ? writer_->size() : 0; }
  int64_t modified_ms() const { return modified_ms_; }  // once Finish() succeeded: the file's mtime

 private:
  std::unique_ptr<isolation::SandboxFileWriter> writer_;
  int64_t max_bytes_;
  int64_t modified_ms_ = 0;
};

// A gzip body (Content-Encoding: gzip) inflated on its way to `inner`, at
// most `max_bytes` decompressed bytes in all (413 past them, whatever the
// compressed size: a gzip bomb stops at the cap); corrupt or truncated gzip
// is InvalidArgument (400), and `inner` is then never finished (nothing is
// committed).
class GzipSink : public BodySink {
 public:
  GzipSink(std::shared_ptr<BodySink> inner, int64_t max_bytes)
      : inner_(std::move(inner)), inflater_(max_bytes, "--max-file") {}
  Status Write(std::string_view bytes) override;
  Status Finish() override;

 private:
  std::shared_ptr<BodySink> inner_;
  model::GzipInflater inflater_;
};

// E2B's POST /files in multipart/form-data: each part named "file" goes to
// `path` (when given: then one part only) or to its filename, E2B paths
// (model::E2bPathToSandbox). Every file is committed at the end, none when
// any part fails; each with `metadata` (the request's, as E2B applies it to
// every file of an upload).
class MultipartSink : public BodySink, private model::MultipartReader::Handler {
 public:
  // `home`, `tmp`: the sandbox's /home/user and /tmp (each part's E2B path
  // names one: model::E2bPathToPlace).
  MultipartSink(UniqueFd home, UniqueFd tmp, std::unique_ptr<model::MultipartReader> reader,
                std::optional<std::string> path, int64_t max_bytes, isolation::SandboxMetadata metadata = {})
      : root_(std::move(home)),
        tmp_(std::move(tmp)),
        reader_(std::move(reader)),
        path_(std::move(path)),
        max_bytes_(max_bytes),
        metadata_(std::move(metadata)) {}
  Status Write(std::string_view bytes) override;
  Status Finish() override;
  // The E2B paths written (/home/user/... or /tmp/...), once finished.
  const std::vector<std::string>& written() const { return written_; }

 private:
  bool OnPartBegin(const model::MultipartPartInfo& part) override;
  bool OnPartData(std::string_view bytes) override;
  bool OnPartEnd() override;
  bool Fail(Status st);

  UniqueFd root_, tmp_;
  std::unique_ptr<model::MultipartReader> reader_;
  std::optional<std::string> path_;
  int64_t max_bytes_;
  isolation::SandboxMetadata metadata_;
  std::vector<std::unique_ptr<isolation::SandboxFileWriter>> files_;
  isolation::SandboxFileWriter* current_ = nullptr;  // the part being written (null: a part not named "file")
  std::vector<std::string> places_;  // each file's E2B path, in the order of files_
  std::vector<std::string> written_;
  Status failed_;
};

}  // namespace airlock::api
