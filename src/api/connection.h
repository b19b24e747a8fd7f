// api::Connection: one client connection of any door (the API, the E2B
// ports), one request at a time. It is the transport: it reads a header
// under its timeout, runs the pipeline's phases on it (api/pipeline.h), reads
// the body the route's policy allows, hands the request to its handler as an
// Exchange (api/exchange.h), writes the answer (whole, a file piece by piece,
// or a stream of events), then waits for the next request (keep-alive) or
// closes. It counts against the connection budget (api/admission.h) while it
// waits.
//
//   std::make_shared<Connection>(state, std::move(socket), Door::kApi)->Begin();
//
// Every method is called on the event-loop thread.
#pragma once

#include "api/net.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/admission.h"
#include "api/event_stream.h"
#include "api/exchange.h"
#include "api/pipeline.h"
#include "api/route.h"

namespace airlock::api {

class ServerState;

class Connection : public std::enable_shared_from_this<Connection>, public ConnectionBudget::Member, public Transport {
 public:
  Connection(ServerState& s, tcp::socket socket, Door door);
  ~Connection() override;

  void Begin();
  // Drain: a connection waiting for its next request is closed now.
  void CloseIfIdle();
  // The connection budget needs the room (this connection waits).
  void Evict() override;

  // The Transport of the exchange whose request this connection is
  // handling (`ex` must be it; else nothing happens).
  bool Current(const Exchange* ex) const override;
  void Write(const Exchange* ex, Reply reply) override;
  void WatchDisconnect(const Exchange* ex) override;
  void ReadBodyInto(const Exchange* ex, std::shared_ptr<BodySink> sink, std::function<void(Status)> done) override;
  std::shared_ptr<EventStream> MakeEvents(const Exchange* ex, const EventStream::Options& options) override;
  // A streamed answer's end was written (`ok`) or failed.
  void EventsEnded(const Exchange* ex, bool ok) override;
  bool keep_alive() const override { return keep_alive_; }
  void Close() override;

 private:
  enum class State { kHeader, kBody, kHandling, kWriting, kClosed };

  void ReadHeader(double timeout_s);
  void OnHeader(const error_code& ec);
  RequestHead Head() const;
  void RefuseEarly(const Refusal& r);
  void ReadJsonBody(uint64_t cap, bool drop);
  void Dispatch();
  void SendContinue(std::function<void()> then);
  void OnReadError(const error_code& ec, uint64_t cap);
  void WriteFilePiece(std::shared_ptr<Reply::File> file, int64_t sent);
  void ReadUploadPiece(std::shared_ptr<BodySink> sink, std::function<void(Status)> done);
  void Finish(bool ok);
  void Discard(size_t total);

  ServerState& s_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  const Door door_;
  std::string remote_, address_;
  State state_ = State::kHeader;
  bool keep_alive_ = true;
  // The header is read with no body type; the body phase moves the parser to
  // the one the route's policy needs.
  std::optional<http::request_parser<http::empty_body>> head_;
  std::optional<http::request_parser<http::string_body>> json_;
  std::optional<http::request_parser<http::buffer_body>> upload_;
  std::shared_ptr<Exchange> ex_;
  RouteMatch match_;
  uint64_t watch_gen_ = 0;
  // One buffer for what passes through in pieces: a file sent, an upload
  // read, a refused body discarded.
  std::unique_ptr<char[]> piece_;
  std::shared_ptr<void> write_hold_;  // what a write in flight needs alive (a response, its serializer)
};

}  // namespace airlock::api
