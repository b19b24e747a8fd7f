#include "model/gzip_inflate.h"

#include <zlib.h>

#include <array>

namespace airlock::model {
namespace {

// What one inflate() call may produce: the most held of the decompressed body.
constexpr size_t kOutPiece = 64 * 1024;

Status Corrupt(const char* zmsg) {
  return Status(ErrorCode::kInvalidArgument,
                std::string("the body is not valid gzip (Content-Encoding: gzip): ") + (zmsg ? zmsg : "corrupt data"));
}

}  // namespace

struct GzipInflater::Stream {
  z_stream z{};
  bool ready = false;     // inflateInit2 succeeded
  bool started = false;   // a member was begun
  std::array<unsigned char, kOutPiece> out{};
  ~Stream() {
    if (ready) inflateEnd(&z);
  }
};

GzipInflater::GzipInflater(int64_t max_output, std::string what)
    : z_(std::make_unique<Stream>()), max_output_(max_output), what_(std::move(what)) {
  // 16 + MAX_WBITS: a gzip wrapper only (not zlib's, not raw deflate), with
  // the largest window (32 KiB: the memory a stream holds besides `out`).
  if (inflateInit2(&z_->z, 16 + MAX_WBITS) == Z_OK) {
    z_->ready = true;
  } else {
    failed_ = Status(ErrorCode::kInternal, "zlib could not start an inflate stream (out of memory?)");
  }
}

GzipInflater::~GzipInflater() = default;

Status GzipInflater::Feed(std::string_view compressed, const Output& out) {
  if (!failed_.ok()) return failed_;
  z_stream& z = z_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  auto fail = [this](Status st) {
    failed_ = st;
    return st;
  };
  while (true) {
    if (!in_member_) {
      if (z.avail_in == 0) break;
      // Another member after the first: the same stream, reset.
      if (z_->started && inflateReset(&z) != Z_OK) return fail(Corrupt(z.msg));
      z_->started = true;
      in_member_ = true;
    }
    z.next_out = z_->out.data();
    z.avail_out = static_cast<uInt>(z_->out.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t n = z_->out.size() - z.avail_out;
    if (n > 0) {
      if (produced_ + static_cast<int64_t>(n) > max_output_) {
        return fail(Status(ErrorCode::kResourceExhausted,
                           "the gzip body decompresses to more than " + std::to_string(max_output_) + " bytes (" +
                               what_ + ")"));
      }
      produced_ += static_cast<int64_t>(n);
      if (Status st = out(std::string_view(reinterpret_cast<const char*>(z_->out.data()), n)); !st.ok()) {
        return fail(st);
      }
    }
    if (rc == Z_STREAM_END) {
      in_member_ = false;
      continue;
    }
    if (rc == Z_OK) {
      if (z.avail_in == 0 && z.avail_out != 0) break;  // all input taken, nothing pending
      continue;
    }
    if (rc == Z_BUF_ERROR) break;  // no progress without more input
    return fail(Corrupt(z.msg));   // Z_DATA_ERROR, Z_NEED_DICT, Z_MEM_ERROR
  }
  z.next_in = nullptr;  // `compressed` is not ours past this call
  return Status::Ok();
}

Status GzipInflater::Finish() {
  if (!failed_.ok()) return failed_;
  if (!z_->started) return Status(ErrorCode::kInvalidArgument, "the body is empty, not gzip (Content-Encoding: gzip)");
  if (in_member_) {
    return Status(ErrorCode::kInvalidArgument,
                  "the gzip body ends in the middle of its data (truncated; Content-Encoding: gzip)");
  }
  return Status::Ok();
}

}  // namespace airlock::model
