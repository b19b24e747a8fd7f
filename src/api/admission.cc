#include "api/admission.h"

#include <arpa/inet.h>

namespace airlock::api {

model::ApiError QuotaError(const std::string& quota, const std::string& flag, const std::string& what,
                           int retry_after_s) {
  model::ApiError e{model::ErrorKind::kTooManyRequests, "quota " + quota + " (" + flag + "): " + what, ""};
  e.code = "quota_exceeded";
  e.quota = quota;
  e.retry_after_s = retry_after_s;
  return e;
}

AdmissionTicket& AdmissionTicket::operator=(AdmissionTicket&& o) noexcept {
  if (this != &o) {
    Release();
    budgets_ = o.budgets_;
    owner_ = std::move(o.owner_);
    body_bytes_ = o.body_bytes_;
    upload_ = o.upload_;
    o.budgets_ = nullptr;
    o.body_bytes_ = 0;
    o.upload_ = false;
  }
  return *this;
}

void AdmissionTicket::Release() {
  if (budgets_ == nullptr) return;
  budgets_->Give(owner_, body_bytes_, upload_);
  budgets_ = nullptr;
  body_bytes_ = 0;
  upload_ = false;
}

std::optional<model::ApiError> Admission::Admit(const std::string& owner, uint64_t body_bytes, bool upload,
                                                AdmissionTicket* ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (upload && opt_.per_owner) {
    size_t& n = uploads_by_owner_[owner];
    if (n >= opt_.uploads_per_owner) {
      return QuotaError("uploads_per_owner", "--max-uploads-per-owner",
                        "token '" + owner + "' has " + std::to_string(n) + " uploads under way, the most it may; "
                        "retry when one is done");
    }
  }
  if (held_ + body_bytes > opt_.body_buffer_bytes) {
    return QuotaError("body_buffer", "--max-body-buffer",
                      "the server holds " + std::to_string(held_) + " bytes of request bodies, and this one's " +
                          std::to_string(body_bytes) + " would pass its budget of " +
                          std::to_string(opt_.body_buffer_bytes) + "; retry shortly");
  }
  if (opt_.per_owner) {
    uint64_t mine = held_by_owner_.count(owner) ? held_by_owner_[owner] : 0;
    if (mine + body_bytes > opt_.body_buffer_per_owner) {
      return QuotaError("body_buffer_per_owner", "--max-body-buffer-per-owner",
                        "token '" + owner + "' has " + std::to_string(mine) +
                            " bytes of request bodies being read, and this one's " + std::to_string(body_bytes) +
                            " would pass its budget of " + std::to_string(opt_.body_buffer_per_owner));
    }
  }
  held_ += body_bytes;
  if (opt_.per_owner) {
    held_by_owner_[owner] += body_bytes;
    if (upload) ++uploads_by_owner_[owner];
  }
  ticket->Release();
  ticket->budgets_ = this;
  ticket->owner_ = opt_.per_owner ? owner : std::string();
  ticket->body_bytes_ = body_bytes;
  ticket->upload_ = upload && opt_.per_owner;
  return std::nullopt;
}

void Admission::Give(const std::string& owner, uint64_t body_bytes, bool upload) {
  std::lock_guard<std::mutex> lock(mu_);
  held_ -= std::min(held_, body_bytes);
  if (!opt_.per_owner) return;
  if (auto it = held_by_owner_.find(owner); it != held_by_owner_.end()) {
    it->second -= std::min(it->second, body_bytes);
    if (it->second == 0) held_by_owner_.erase(it);
  }
  if (upload) {
    if (auto it = uploads_by_owner_.find(owner); it != uploads_by_owner_.end()) {
      if (it->second > 0) --it->second;
      if (it->second == 0) uploads_by_owner_.erase(it);
    }
  }
}

uint64_t Admission::body_bytes_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

std::string AddressKey(const std::string& address) {
  struct in6_addr a6;
  if (address.find(':') != std::string::npos && ::inet_pton(AF_INET6, address.c_str(), &a6) == 1) {
    // An IPv4-mapped address is the IPv4 client it maps.
    static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::equal(kMapped, kMapped + 12, a6.s6_addr)) {
      char text[INET_ADDRSTRLEN] = "";
      ::inet_ntop(AF_INET, a6.s6_addr + 12, text, sizeof text);
      return text;
    }
    std::fill(a6.s6_addr + 8, a6.s6_addr + 16, 0);
    char text[INET6_ADDRSTRLEN] = "";
    ::inet_ntop(AF_INET6, &a6, text, sizeof text);
    return std::string(text) + "/64";
  }
  return address;
}

bool ConnectionBudget::Accept(const std::string& address) {
  const std::string key = AddressKey(address);
  while (waiting_from(key) >= per_address_) {
    const size_t before = evicted_;
    EvictOldest(&key);
    if (evicted_ == before) break;
  }
  while (open_.size() >= max_) {
    const size_t before = evicted_;
    EvictOldest(nullptr);
    if (evicted_ == before) return false;  // every connection is busy
  }
  return true;
}

void ConnectionBudget::Open(Member* m, const std::string& address) {
  Entry e;
  e.address = AddressKey(address);
  e.at = waiting_.end();
  open_[m] = std::move(e);
}

void ConnectionBudget::Close(Member* m) {
  auto it = open_.find(m);
  if (it == open_.end()) return;
  Busy(m);
  open_.erase(it);
}

void ConnectionBudget::Waiting(Member* m) {
  auto it = open_.find(m);
  if (it == open_.end() || it->second.waiting) return;
  it->second.waiting = true;
  it->second.at = waiting_.insert(waiting_.end(), m);
  ++waiting_by_address_[it->second.address];
}

void ConnectionBudget::Busy(Member* m) {
  auto it = open_.find(m);
  if (it == open_.end() || !it->second.waiting) return;
  it->second.waiting = false;
  waiting_.erase(it->second.at);
  it->second.at = waiting_.end();
  auto w = waiting_by_address_.find(it->second.address);
  if (w != waiting_by_address_.end() && --w->second == 0) waiting_by_address_.erase(w);
}

size_t ConnectionBudget::waiting_from(const std::string& address) const {
  auto it = waiting_by_address_.find(address);
  return it == waiting_by_address_.end() ? 0 : it->second;
}

void ConnectionBudget::EvictOldest(const std::string* address) {
  for (Member* m : waiting_) {
    auto it = open_.find(m);
    if (it == open_.end()) continue;
    if (address && it->second.address != *address) continue;
    // Out of the books first: the connection's own Close() comes later (its
    // handlers complete with an error), and the room is needed now.
    Close(m);
    ++evicted_;
    m->Evict();
    return;
  }
}

}  // namespace airlock::api
