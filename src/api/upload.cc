#include "api/upload.h"

#include "model/e2b.h"

namespace airlock::api {
namespace {

Status TooLarge(int64_t max_bytes) {
  return Status(ErrorCode::kResourceExhausted,
                "the upload is over this server's cap of " + std::to_string(max_bytes) + " bytes (--max-file)");
}

}  // namespace

Status FileSink::Write(std::string_view bytes) {
  if (writer_->size() + static_cast<int64_t>(bytes.size()) > max_bytes_) return TooLarge(max_bytes_);
  return writer_->Write(bytes);
}

Status FileSink::Finish() { return writer_->Commit(&modified_ms_); }

Status GzipSink::Write(std::string_view bytes) {
  return inflater_.Feed(bytes, [this](std::string_view out) { return inner_->Write(out); });
}

Status GzipSink::Finish() {
  RETURN_IF_ERROR(inflater_.Finish());
  return inner_->Finish();
}

bool MultipartSink::Fail(Status st) {
  failed_ = std::move(st);
  reader_->Stop(failed_.message());
  return false;
}

Status MultipartSink::Write(std::string_view bytes) {
  if (!reader_->Feed(bytes, *this)) {
    return failed_.ok() ? Status(ErrorCode::kInvalidArgument, reader_->error()) : failed_;
  }
  return Status::Ok();
}

Status MultipartSink::Finish() {
  if (!reader_->Finish(*this)) return Status(ErrorCode::kInvalidArgument, reader_->error());
  if (files_.empty()) return Status(ErrorCode::kInvalidArgument, "no multipart field named 'file'");
  for (auto& f : files_) RETURN_IF_ERROR(f->Commit());
  written_ = places_;
  return Status::Ok();
}

bool MultipartSink::OnPartBegin(const model::MultipartPartInfo& part) {
  current_ = nullptr;
  if (part.name != "file") return true;  // other fields are read and dropped
  if (path_ && !files_.empty()) {
    return Fail(Status(ErrorCode::kInvalidArgument, "?path= names one file but the body has several"));
  }
  std::string target = path_ ? *path_ : part.filename;
  if (target.empty()) {
    return Fail(Status(ErrorCode::kInvalidArgument, "an uploaded file has neither ?path= nor a filename"));
  }
  model::E2bPlace place;
  std::string why;
  if (!model::E2bPathToPlace(target, &place, &why)) return Fail(Status(ErrorCode::kInvalidArgument, why));
  auto w = isolation::SandboxFileWriter::Open(place.tmp ? tmp_.get() : root_.get(), place.relative,
                                              /*make_parents=*/true);
  if (!w.ok()) return Fail(w.status());
  (*w)->SetMetadata(metadata_);
  current_ = w->get();
  files_.push_back(std::move(*w));
  places_.push_back(place.e2b_path());
  return true;
}

bool MultipartSink::OnPartData(std::string_view bytes) {
  if (current_ == nullptr) return true;
  if (current_->size() + static_cast<int64_t>(bytes.size()) > max_bytes_) return Fail(TooLarge(max_bytes_));
  Status st = current_->Write(bytes);
  return st.ok() || Fail(std::move(st));
}

bool MultipartSink::OnPartEnd() {
  current_ = nullptr;
  return true;
}

}  // namespace airlock::api
