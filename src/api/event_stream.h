// api::EventStream: a streamed HTTP response (chunked transfer encoding) of
// events, NDJSON or server-sent events (model/stream_events.h), written on the
// connection from the event-loop thread. Any producer can drive one: a
// one-shot run (/v1/execute with Accept: application/x-ndjson), a session's
// call. Every method must be called on the event-loop thread.
//
//   auto es = EventStream::Create(tcp_stream, connection_shared_ptr,
//                                 {model::StreamFormat::kNdjson, /*keepalive_s=*/5, /*max_queued_bytes=*/1 << 20,
//                                  /*write_timeout_s=*/30},
//                                 [conn] { conn->ClientGone(); });        // write failed or timed out
//   es->Begin(200, {{"X-Request-Id", id}}, /*keep_alive=*/true);          // header; keepalives start
//   es->Output("stdout", bytes);                  // text events, whole UTF-8 characters, timestamped
//   es->Event("result", json);                    // any event object (one line of JSON)
//   es->FlushOutput();                            // what output held back (a split character)
//   es->End("end_of_execution", final_json, [conn](bool ok) { ok ? conn->NextRequest() : conn->Close(); });
//
// Bounded memory per connection: an output event (Output(), and Event(...,
// droppable=true)) is dropped, and counted, when it would take the events
// waiting behind the write in flight past max_queued_bytes (a client that
// does not read); one always goes into an empty queue. So at most about twice
// max_queued_bytes (the waiting events and the write in flight) plus one event
// are held. The keepalive, non-droppable events and the final event always go. A write that
// does not complete within write_timeout_s (the client stopped reading
// entirely) counts as the client gone. The caller reports the counts
// (dropped_events/dropped_bytes) in its final event.
//
// Keepalive: {"type":"keepalive"} whenever nothing was sent for keepalive_s
// seconds, so that a client sees the run is alive and a vanished client is
// noticed by a failing write.
#pragma once

// Boost 1.74's asio headers need <utility> first under g++ 12 -std=c++20
// (research/ecosystem.md §6.3).
#include <utility>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/stream_events.h"

namespace airlock::api {

class EventStream : public std::enable_shared_from_this<EventStream> {
 public:
  struct Options {
    model::StreamFormat format = model::StreamFormat::kNdjson;
    double keepalive_s = 5;
    size_t max_queued_bytes = size_t{1} << 20;
    double write_timeout_s = 30;
    // The keepalive event's JSON; "": {"type":"keepalive"}. (A Connect
    // stream's keepalive is a message of the call's own type.)
    std::string keepalive_json;
  };

  // `stream` is the connection; `owner` owns it (the connection object): each
  // write in flight holds `owner`, so the socket outlives the write, and
  // nothing is written once it is gone. `on_gone` is called once, on the
  // event loop, when a write fails or times out (the client went away or
  // stopped reading); it is not called after End's `done`, nor after Abort().
  static std::shared_ptr<EventStream> Create(boost::beast::tcp_stream& stream, std::weak_ptr<void> owner,
                                             Options options, std::function<void()> on_gone);

  // Sends the response header: `status`, the format's Content-Type,
  // Cache-Control: no-cache, X-Accel-Buffering: no, Transfer-Encoding:
  // chunked, `headers`, Connection per `keep_alive`. Starts the keepalives.
  // Events queued before it are sent after it.
  void Begin(int status, const std::vector<std::pair<std::string, std::string>>& headers, bool keep_alive);

  // Queues one event (`json` is one line). Droppable events are dropped while
  // the queue is over its bound; returns whether it was queued.
  bool Event(std::string_view type, std::string_view json, bool droppable = false);

  // Output bytes of the program, `stream` "stdout" or "stderr": cut at
  // character boundaries (a split multibyte character waits for its rest),
  // sent as {"type":stream,"text":...,"timestamp":now}; droppable.
  void Output(std::string_view stream, std::string_view bytes);
  // Sends what Output held back (the output ended inside a character: it is
  // replaced with U+FFFD, as the non-streaming response does).
  void FlushOutput();

  // Queues the final event (never dropped), then the last chunk; stops the
  // keepalives. `done(true)` once all of it is written, `done(false)` if the
  // client went away first (on_gone is not called then). Once only.
  void End(std::string_view type, std::string_view json, std::function<void(bool ok)> done);

  // Stops writing (the caller closes the connection): the keepalives stop,
  // nothing is queued or written any more, no callback is called.
  void Abort();

  bool started() const { return started_; }
  bool ended() const { return ended_; }
  // Output events not sent because the client read too slowly, and their text bytes.
  uint64_t dropped_events() const { return dropped_events_; }
  uint64_t dropped_bytes() const { return dropped_bytes_; }
  // Bytes waiting to be written (queued and in flight).
  size_t queued_bytes() const { return queue_.size() + writing_buf_.size(); }
  // The stats for the final event's "stream" member ("" when nothing was dropped).
  std::string StatsJson() const;

 private:
  EventStream(boost::beast::tcp_stream& stream, std::weak_ptr<void> owner, Options options,
              std::function<void()> on_gone);

  void Pump();
  void OnWritten(const boost::system::error_code& ec);
  void Fail();
  void ArmKeepalive();

  boost::beast::tcp_stream& stream_;
  std::weak_ptr<void> owner_;
  Options options_;
  std::function<void()> on_gone_;
  std::function<void(bool)> done_;
  boost::asio::steady_timer keepalive_;
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> header_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> serializer_;

  std::string queue_;        // framed events not yet written
  std::string writing_buf_;  // the chunk being written
  bool started_ = false;
  bool header_written_ = false;
  bool writing_ = false;
  bool ended_ = false;       // End() was called
  bool last_written_ = false;
  bool stopped_ = false;     // Abort(), or the client is gone
  uint64_t seq_ = 0;
  uint64_t dropped_events_ = 0, dropped_bytes_ = 0;
  std::chrono::steady_clock::time_point last_sent_;
  model::Utf8Carry carry_out_, carry_err_;
};

}  // namespace airlock::api
