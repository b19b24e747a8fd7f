// Admission (phase "admit" of the pipeline, docs/api.md "Quotas"): what one
// client may hold of the server at once, decided before a byte of a body is
// read, and the connections each client address may keep waiting.
//
//   Admission budgets(options);
//   AdmissionTicket t;
//   if (auto refused = budgets.Admit(owner, per_owner, body_bytes, upload, &t)) answer 429 (*refused);
//   ...  // t holds the body bytes and the upload slot until it is destroyed or Release()d
//
// Past any budget the answer is 429 with Retry-After, the error naming the
// quota (`"quota": "body_buffer"`, its flag in the message). Per-owner quotas
// apply when tokens are configured: without tokens there are no owners, and
// only the server-wide budgets bind. The quotas on things that outlive a
// request (sessions, MCP sessions, held approvals) are counted where those
// are made (the session manager, the MCP sessions, the approvals book) with
// QuotaError's error. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "model/execute.h"

namespace airlock::api {

struct AdmissionOptions {
  // Bytes of request bodies held at once, server-wide and per owner: a JSON
  // body counts its Content-Length (its cap when chunked) until its request
  // ends (read, parsed, its code analyzed and queued for a run slot, run); an
  // upload counts its one buffer (kUploadBuffer).
  uint64_t body_buffer_bytes = uint64_t{64} << 20;          // --max-body-buffer
  uint64_t body_buffer_per_owner = uint64_t{16} << 20;      // --max-body-buffer-per-owner
  size_t uploads_per_owner = 4;                             // --max-uploads-per-owner
  bool per_owner = false;                                   // tokens configured
};

// The buffer an upload reads into: what one upload holds of the server.
inline constexpr size_t kUploadBuffer = 64 * 1024;

// A 429 naming a quota: `quota` ("sessions_per_owner"), the flag that sets it,
// and what is in use, for the message.
model::ApiError QuotaError(const std::string& quota, const std::string& flag, const std::string& what,
                           int retry_after_s = 1);

class Admission;

// What one request holds of the budgets; released when destroyed.
class AdmissionTicket {
 public:
  AdmissionTicket() = default;
  AdmissionTicket(AdmissionTicket&& o) noexcept { *this = std::move(o); }
  AdmissionTicket& operator=(AdmissionTicket&& o) noexcept;
  ~AdmissionTicket() { Release(); }
  void Release();  // the body was read and parsed: its bytes are the handler's now
  uint64_t body_bytes() const { return body_bytes_; }

 private:
  friend class Admission;
  Admission* budgets_ = nullptr;
  std::string owner_;
  uint64_t body_bytes_ = 0;
  bool upload_ = false;
};

class Admission {
 public:
  explicit Admission(AdmissionOptions options) : opt_(options) {}

  // Takes `body_bytes` of the body budgets and, for an upload, one of the
  // owner's upload slots. nullopt: admitted (*ticket holds them); else the 429.
  std::optional<model::ApiError> Admit(const std::string& owner, uint64_t body_bytes, bool upload,
                                       AdmissionTicket* ticket);

  uint64_t body_bytes_held() const;
  const AdmissionOptions& options() const { return opt_; }

 private:
  friend class AdmissionTicket;
  void Give(const std::string& owner, uint64_t body_bytes, bool upload);

  AdmissionOptions opt_;
  mutable std::mutex mu_;
  uint64_t held_ = 0;
  std::map<std::string, uint64_t> held_by_owner_;
  std::map<std::string, size_t> uploads_by_owner_;
};

// The connections that wait on a client (a header not yet complete, or idle
// between requests), per client address and server-wide (phase "accept").
// When a new connection would pass the per-address budget, or the server's
// cap, the oldest waiting connection (of that address first) is closed to
// make room: a client that opens connections and sends half a header on
// each pushes out its own, not another client's requests, and a connection
// whose request is being handled is never closed for it. Loop thread only.
class ConnectionBudget {
 public:
  // What a budget closes: Evict() is called, then the connection leaves.
  class Member {
   public:
    virtual ~Member() = default;
    virtual void Evict() = 0;
  };

  ConnectionBudget(size_t max_connections, size_t max_waiting_per_address)
      : max_(max_connections), per_address_(max_waiting_per_address) {}

  // A new connection from `address` ("" when unknown): closes what must be
  // closed to make room; false when there is no room (every connection is
  // busy), and the new one must be refused.
  bool Accept(const std::string& address);
  // A connection's lifetime, and its waiting spells.
  void Open(Member* m, const std::string& address);
  void Close(Member* m);
  void Waiting(Member* m);  // reading a header, or idle between requests
  void Busy(Member* m);     // its request is being handled

  size_t open() const { return open_.size(); }
  size_t waiting() const { return waiting_.size(); }
  size_t evicted() const { return evicted_; }
  size_t waiting_from(const std::string& address) const;

 private:
  struct Entry {
    std::string address;
    bool waiting = false;
    std::list<Member*>::iterator at;
  };
  void EvictOldest(const std::string* address);

  size_t max_, per_address_;
  std::map<Member*, Entry> open_;
  std::list<Member*> waiting_;  // oldest first
  std::map<std::string, size_t> waiting_by_address_;
  size_t evicted_ = 0;
};

// The key of a client address for the per-address budget: the address
// itself, an IPv6 address's /64 (one host may have many of those).
std::string AddressKey(const std::string& address);

}  // namespace airlock::api
