// A gzip body (Content-Encoding: gzip, RFC 1952) decompressed as it arrives,
// in bounded memory and with a bound on what it expands to: E2B's SDK gzips
// uploads, and a few kilobytes of gzip can claim gigabytes (a "gzip bomb"),
// so the cap is checked on the decompressed bytes, before they are passed on.
//
//   GzipInflater in(/*max_output=*/max_file);
//   for each piece of the body:
//     Status st = in.Feed(piece, [&](std::string_view bytes) { return sink.Write(bytes); });
//     if (!st.ok()) refuse(st);   // InvalidArgument: corrupt; ResourceExhausted: over the cap
//   RETURN_IF_ERROR(in.Finish()); // InvalidArgument: the stream was cut short
//
// Several gzip members one after the other are one body (RFC 1952, 2.2), as
// gunzip reads them. Bytes after the last member that are not another member
// are corrupt. Pure code, no I/O; the only user of zlib (one folder).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace airlock::model {

class GzipInflater {
 public:
  // Receives the decompressed bytes a piece at a time (at most 64 KiB each);
  // a non-OK status stops the inflater and is returned by Feed.
  using Output = std::function<Status(std::string_view)>;

  // `max_output`: the decompressed bytes allowed in all (ResourceExhausted
  // once more would come; nothing past the cap is ever passed on). `what`
  // names the cap in that message (e.g. "--max-file").
  explicit GzipInflater(int64_t max_output, std::string what = "the cap");
  ~GzipInflater();
  GzipInflater(const GzipInflater&) = delete;
  GzipInflater& operator=(const GzipInflater&) = delete;

  Status Feed(std::string_view compressed, const Output& out);
  // The body ended: InvalidArgument unless it ended with a whole member.
  Status Finish();
  int64_t output_bytes() const { return produced_; }

 private:
  struct Stream;
  std::unique_ptr<Stream> z_;
  const int64_t max_output_;
  const std::string what_;
  int64_t produced_ = 0;
  bool in_member_ = false;  // a member began and has not ended
  Status failed_;
};

}  // namespace airlock::model
