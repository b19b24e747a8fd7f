// A streamed response of events (api/event_stream.h).
#include "api/event_stream.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace airlock::api {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

namespace {

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

std::shared_ptr<EventStream> EventStream::Create(beast::tcp_stream& stream, std::weak_ptr<void> owner,
                                                 Options options, std::function<void()> on_gone) {
  return std::shared_ptr<EventStream>(new EventStream(stream, std::move(owner), options, std::move(on_gone)));
}

EventStream::EventStream(beast::tcp_stream& stream, std::weak_ptr<void> owner, Options options,
                         std::function<void()> on_gone)
    : stream_(stream),
      owner_(std::move(owner)),
      options_(options),
      on_gone_(std::move(on_gone)),
      keepalive_(stream.get_executor()) {}

void EventStream::Begin(int status, const std::vector<std::pair<std::string, std::string>>& headers,
                        bool keep_alive) {
  if (started_ || stopped_) return;
  started_ = true;
  header_.emplace();
  auto& res = *header_;
  res.version(11);
  res.result(static_cast<unsigned>(status));
  res.set(http::field::server, "airlock");
  res.set(http::field::content_type, model::StreamContentType(options_.format));
  // No proxy or browser may hold events back or keep them.
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Accel-Buffering", "no");
  for (const auto& [k, v] : headers) res.set(k, v);
  res.keep_alive(keep_alive);
  res.chunked(true);
  serializer_.emplace(res);
  // Small events must leave at once, not wait for the previous one's ACK.
  error_code ignored;
  stream_.socket().set_option(net::ip::tcp::no_delay(true), ignored);
  auto owner = owner_.lock();
  if (!owner) return Fail();
  writing_ = true;
  stream_.expires_after(Ms(options_.write_timeout_s));
  http::async_write_header(stream_, *serializer_,
                           [self = shared_from_this(), owner](const error_code& ec, size_t) {
                             self->header_written_ = true;
                             self->OnWritten(ec);
                           });
  last_sent_ = std::chrono::steady_clock::now();
  ArmKeepalive();
}

bool EventStream::Event(std::string_view type, std::string_view json, bool droppable) {
  if (stopped_ || ended_) return false;
  // An event into an empty queue always goes (so a bound smaller than one
  // read of output does not starve a client that keeps up); behind others,
  // only within the bound.
  if (droppable && !queue_.empty() && queue_.size() + json.size() > options_.max_queued_bytes) {
    ++dropped_events_;
    return false;
  }
  queue_ += model::FrameEvent(options_.format, type, json, ++seq_);
  last_sent_ = std::chrono::steady_clock::now();
  Pump();
  return true;
}

void EventStream::Output(std::string_view stream, std::string_view bytes) {
  if (stopped_ || ended_) return;
  model::Utf8Carry& carry = stream == "stderr" ? carry_err_ : carry_out_;
  std::string text = carry.Take(bytes);
  if (text.empty()) return;
  std::string ts = model::StreamTimestamp(std::chrono::system_clock::now());
  if (!Event(stream, model::OutputEvent(stream, text, ts), /*droppable=*/true)) dropped_bytes_ += text.size();
}

void EventStream::FlushOutput() {
  for (const char* name : {"stdout", "stderr"}) {
    model::Utf8Carry& carry = std::string_view(name) == "stderr" ? carry_err_ : carry_out_;
    std::string rest = carry.Flush();
    if (rest.empty() || stopped_ || ended_) continue;
    std::string ts = model::StreamTimestamp(std::chrono::system_clock::now());
    if (!Event(name, model::OutputEvent(name, rest, ts), /*droppable=*/true)) dropped_bytes_ += rest.size();
  }
}

void EventStream::End(std::string_view type, std::string_view json, std::function<void(bool ok)> done) {
  if (ended_) return;
  done_ = std::move(done);
  if (stopped_) {
    // The client is gone already: say so, off this call stack.
    auto d = std::move(done_);
    net::post(stream_.get_executor(), [d = std::move(d)] { d(false); });
    ended_ = true;
    return;
  }
  queue_ += model::FrameEvent(options_.format, type, json, ++seq_);
  ended_ = true;
  keepalive_.cancel();
  Pump();
}

void EventStream::Abort() {
  stopped_ = true;
  done_ = nullptr;
  on_gone_ = nullptr;
  keepalive_.cancel();
  queue_.clear();
}

std::string EventStream::StatsJson() const {
  if (dropped_events_ == 0) return "";
  return model::StreamStatsJson(dropped_events_, dropped_bytes_);
}

void EventStream::Pump() {
  if (stopped_ || writing_ || !header_written_) return;
  auto owner = owner_.lock();
  if (!owner) return Fail();
  if (!queue_.empty()) {
    writing_buf_.swap(queue_);
    queue_.clear();
    writing_ = true;
    stream_.expires_after(Ms(options_.write_timeout_s));
    net::async_write(stream_, http::make_chunk(net::buffer(writing_buf_)),
                     [self = shared_from_this(), owner](const error_code& ec, size_t) { self->OnWritten(ec); });
    return;
  }
  if (ended_ && !last_written_) {
    last_written_ = true;
    writing_ = true;
    stream_.expires_after(Ms(options_.write_timeout_s));
    net::async_write(stream_, http::make_chunk_last(),
                     [self = shared_from_this(), owner](const error_code& ec, size_t) { self->OnWritten(ec); });
  }
}

void EventStream::OnWritten(const error_code& ec) {
  writing_ = false;
  writing_buf_.clear();
  if (stopped_) return;
  if (ec) return Fail();
  if (last_written_) {
    stream_.expires_never();
    stopped_ = true;
    on_gone_ = nullptr;
    if (auto done = std::move(done_)) done(true);
    return;
  }
  if (queue_.empty() && !ended_) stream_.expires_never();
  Pump();
}

void EventStream::Fail() {
  if (stopped_) return;
  stopped_ = true;
  keepalive_.cancel();
  queue_.clear();
  if (done_) {
    auto done = std::move(done_);
    on_gone_ = nullptr;
    done(false);
  } else if (on_gone_) {
    auto gone = std::move(on_gone_);
    gone();
  }
}

void EventStream::ArmKeepalive() {
  if (stopped_ || ended_ || options_.keepalive_s <= 0) return;
  keepalive_.expires_at(last_sent_ + Ms(options_.keepalive_s));
  std::weak_ptr<EventStream> weak = weak_from_this();
  keepalive_.async_wait([weak](const error_code& ec) {
    auto self = weak.lock();
    if (ec || !self || self->stopped_ || self->ended_) return;
    if (std::chrono::steady_clock::now() >= self->last_sent_ + Ms(self->options_.keepalive_s)) {
      // Only when nothing is waiting: a queue that is not moving says nothing new.
      if (self->queued_bytes() == 0) {
        self->Event("keepalive", self->options_.keepalive_json.empty() ? model::KeepaliveEvent()
                                                                      : self->options_.keepalive_json);
      } else {
        self->last_sent_ = std::chrono::steady_clock::now();
      }
    }
    self->ArmKeepalive();
  });
}

}  // namespace airlock::api
