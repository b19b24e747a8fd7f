// Streaming: the event formats (model/stream_events.h) and the writer
// (api/event_stream.h) over a real loopback TCP connection.
#include <utility>

#include "api/event_stream.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "model/execute.h"
#include "model/stream_events.h"

namespace airlock {
namespace {

using model::StreamFormat;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

TEST(StreamFormat, NegotiatesAccept) {
  using model::NegotiateStreamFormat;
  EXPECT_EQ(NegotiateStreamFormat(""), StreamFormat::kNone);
  EXPECT_EQ(NegotiateStreamFormat("application/json"), StreamFormat::kNone);
  EXPECT_EQ(NegotiateStreamFormat("*/*"), StreamFormat::kNone);
  EXPECT_EQ(NegotiateStreamFormat("application/x-ndjson"), StreamFormat::kNdjson);
  EXPECT_EQ(NegotiateStreamFormat("Application/X-NDJSON"), StreamFormat::kNdjson);
  EXPECT_EQ(NegotiateStreamFormat("application/ndjson"), StreamFormat::kNdjson);
  EXPECT_EQ(NegotiateStreamFormat("text/event-stream"), StreamFormat::kSse);
  EXPECT_EQ(NegotiateStreamFormat("application/json, text/event-stream"), StreamFormat::kSse);
  EXPECT_EQ(NegotiateStreamFormat(" text/event-stream ; q=0.5 , application/x-ndjson;q=0.4"), StreamFormat::kSse);
  EXPECT_EQ(NegotiateStreamFormat("text/event-stream;q=0.5, application/x-ndjson"), StreamFormat::kNdjson);
  EXPECT_EQ(NegotiateStreamFormat("text/event-stream, application/x-ndjson"), StreamFormat::kNdjson);  // tie
  EXPECT_EQ(NegotiateStreamFormat("text/event-stream;q=0"), StreamFormat::kNone);
  EXPECT_EQ(NegotiateStreamFormat("text/event-stream;q=0.000"), StreamFormat::kNone);
  EXPECT_EQ(NegotiateStreamFormat("text/event-stream;q=2"), StreamFormat::kNone);   // malformed: no preference
  EXPECT_EQ(NegotiateStreamFormat("text/event-stream;q=abc"), StreamFormat::kNone);
  EXPECT_EQ(NegotiateStreamFormat("text/event-streamx"), StreamFormat::kNone);
  EXPECT_EQ(NegotiateStreamFormat(",,,;;;q=,"), StreamFormat::kNone);
  EXPECT_STREQ(model::StreamContentType(StreamFormat::kNdjson), "application/x-ndjson");
  EXPECT_STREQ(model::StreamContentType(StreamFormat::kSse), "text/event-stream; charset=utf-8");
}

TEST(Utf8Carry, HoldsBackASplitCharacter) {
  model::Utf8Carry c;
  // "é" = C3 A9, "€" = E2 82 AC, "😀" = F0 9F 98 80
  EXPECT_EQ(c.Take("ab\xC3"), "ab");
  EXPECT_EQ(c.pending(), 1u);
  EXPECT_EQ(c.Take("\xA9z"), "\xC3\xA9z");
  EXPECT_EQ(c.Take("\xE2\x82"), "");
  EXPECT_EQ(c.Take("\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(c.Take("\xF0"), "");
  EXPECT_EQ(c.Take("\x9F"), "");
  EXPECT_EQ(c.Take("\x98"), "");
  EXPECT_EQ(c.Take("\x80!"), "\xF0\x9F\x98\x80!");
  // Invalid bytes pass through: a stray continuation byte, a byte that never starts anything.
  EXPECT_EQ(c.Take("x\x80"), "x\x80");
  EXPECT_EQ(c.Take("\xFF"), "\xFF");
  EXPECT_EQ(c.Take("\xC3\xC3"), "\xC3");  // the first cannot complete; the second may
  EXPECT_EQ(c.Flush(), "\xC3");
  EXPECT_EQ(c.Flush(), "");
}

TEST(Utf8Carry, EveryCutGivesTheSameTextAsTheWhole) {
  const std::string whole = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xFF\x80z\xE2\x82";
  for (size_t cut = 0; cut <= whole.size(); ++cut) {
    for (size_t cut2 = cut; cut2 <= whole.size(); ++cut2) {
      model::Utf8Carry c;
      std::string joined = c.Take(whole.substr(0, cut));
      joined += c.Take(whole.substr(cut, cut2 - cut));
      joined += c.Take(whole.substr(cut2));
      joined += c.Flush();
      EXPECT_EQ(joined, whole) << cut << " " << cut2;
    }
  }
}

TEST(StreamEvents, OutputEventsAreValidJsonLines) {
  std::string e = model::OutputEvent("stdout", "hi \"there\"\n\xFF", "2026-08-21T10:00:00.123456Z");
  EXPECT_EQ(e, "{\"type\":\"stdout\",\"text\":\"hi \\\"there\\\"\\n\xEF\xBF\xBD\","
               "\"timestamp\":\"2026-08-21T10:00:00.123456Z\"}");
  EXPECT_TRUE(model::IsValidUtf8(e));
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_EQ(model::KeepaliveEvent(), "{\"type\":\"keepalive\"}");
}

TEST(StreamEvents, Timestamp) {
  auto t = std::chrono::system_clock::time_point(std::chrono::microseconds(1787306400123456LL));
  EXPECT_EQ(model::StreamTimestamp(t), "2026-08-21T10:00:00.123456Z");
  EXPECT_EQ(model::StreamTimestamp(std::chrono::system_clock::time_point()), "1970-01-01T00:00:00.000000Z");
}

TEST(StreamEvents, FinalEventsInOrder) {
  model::ExecuteResponse r;
  r.results.push_back({false, R"({"image/png":"iVBOR","text/plain":"<Figure>"})", "<Figure>"});
  r.results.push_back({true, R"({"text/plain":"42"})", "42"});
  r.error = model::ErrorInfo{"ZeroDivisionError", "division by zero", "Traceback...\n"};
  auto ev = model::FinalEvents(r);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].type, "result");
  EXPECT_EQ(ev[0].json, R"({"type":"result","data":{"image/png":"iVBOR","text/plain":"<Figure>"},)"
                        R"("is_main_result":false,"text":"<Figure>"})");
  EXPECT_EQ(ev[1].json, R"({"type":"result","data":{"text/plain":"42"},"is_main_result":true,"text":"42"})");
  EXPECT_EQ(ev[2].type, "error");
  EXPECT_EQ(ev[2].json, R"({"type":"error","name":"ZeroDivisionError","traceback":"Traceback...\n",)"
                        R"("value":"division by zero"})");
  EXPECT_TRUE(model::FinalEvents(model::ExecuteResponse()).empty());
}

TEST(StreamEvents, EndOfExecutionCarriesTheWholeResponse) {
  model::ExecuteResponse r;
  r.request_id = "req_1";
  r.run.stdout_text = "out\n";
  r.run.exit_code = 3;
  r.run.kill_reason = "timeout";
  std::string v1 = model::V1ExecuteToJson(r);
  std::string end = model::EndOfExecutionEvent(v1, "");
  EXPECT_EQ(end, R"({"type":"end_of_execution",)" + v1.substr(1));
  EXPECT_NE(end.find(R"("exit_code":3)"), std::string::npos);
  EXPECT_NE(end.find(R"("kill_reason":"timeout")"), std::string::npos);
  EXPECT_EQ(model::EndOfExecutionEvent("{}", ""), R"({"type":"end_of_execution"})");
  EXPECT_EQ(model::EndOfExecutionEvent("{}", model::StreamStatsJson(2, 10)),
            R"({"type":"end_of_execution","stream":{"dropped_bytes":10,"dropped_events":2}})");
  EXPECT_EQ(model::EndOfExecutionEvent(R"({"a":1})", R"({"x":0})"),
            R"({"type":"end_of_execution","a":1,"stream":{"x":0}})");
}

TEST(StreamEvents, Framing) {
  EXPECT_EQ(model::FrameEvent(StreamFormat::kNdjson, "stdout", R"({"type":"stdout"})", 7),
            "{\"type\":\"stdout\"}\n");
  EXPECT_EQ(model::FrameEvent(StreamFormat::kSse, "stdout", R"({"type":"stdout"})", 7),
            "event: stdout\nid: 7\ndata: {\"type\":\"stdout\"}\n\n");
}

// ---------------------------------------------------------------------------
// The writer over a loopback connection.

struct Loopback {
  net::io_context io{1};
  tcp::acceptor acceptor{io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)};
  std::shared_ptr<beast::tcp_stream> server;  // also the owner the writer holds weakly
  tcp::socket client{io};

  explicit Loopback(int client_rcvbuf = 0) {
    if (client_rcvbuf > 0) {
      client.open(tcp::v4());
      client.set_option(net::socket_base::receive_buffer_size(client_rcvbuf));
    }
    client.connect(acceptor.local_endpoint());
    server = std::make_shared<beast::tcp_stream>(acceptor.accept());
  }

  // Runs the loop until `done` or the deadline.
  template <typename Pred>
  bool RunUntil(Pred done, double seconds = 5) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(int(seconds * 1000));
    while (!done() && std::chrono::steady_clock::now() < until) {
      io.run_for(std::chrono::milliseconds(10));
      io.restart();
    }
    return done();
  }

  // Reads the whole response (until the server closes).
  std::string ReadAll() {
    std::string out;
    char buf[65536];
    boost::system::error_code ec;
    for (;;) {
      size_t n = client.read_some(net::buffer(buf), ec);
      if (ec) break;
      out.append(buf, n);
    }
    return out;
  }
};

// The body of a chunked response, decoded with Beast's own parser.
std::string ParseChunked(const std::string& wire, std::string* content_type) {
  http::response_parser<http::string_body> p;
  p.eager(true);
  beast::error_code ec;
  p.put(net::buffer(wire), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(p.is_done());
  EXPECT_TRUE(p.get().chunked());
  if (content_type) *content_type = std::string(p.get()[http::field::content_type]);
  return p.get().body();
}

TEST(EventStreamWriter, WritesChunkedEventsInOrder) {
  Loopback lb;
  bool gone = false, done = false, ok = false;
  api::EventStream::Options o;
  o.format = StreamFormat::kSse;
  auto es = api::EventStream::Create(*lb.server, lb.server, o, [&] { gone = true; });
  es->Output("stdout", "early\xE2\x82");  // queued before Begin; the split character waits
  es->Begin(200, {{"X-Request-Id", "req_1"}}, /*keep_alive=*/false);
  es->Output("stdout", "\xAC\n");
  es->Event("result", R"({"type":"result"})");
  es->FlushOutput();
  es->End("end_of_execution", R"({"type":"end_of_execution"})", [&](bool b) {
    done = true;
    ok = b;
    lb.server->socket().shutdown(tcp::socket::shutdown_both);
  });
  ASSERT_TRUE(lb.RunUntil([&] { return done; }));
  EXPECT_TRUE(ok);
  EXPECT_FALSE(gone);
  std::string ct;
  std::string body = ParseChunked(lb.ReadAll(), &ct);
  EXPECT_EQ(ct, "text/event-stream; charset=utf-8");
  size_t a = body.find("event: stdout\nid: 1\ndata: {\"type\":\"stdout\",\"text\":\"early\"");
  size_t b = body.find("event: stdout\nid: 2\ndata: {\"type\":\"stdout\",\"text\":\"\xE2\x82\xAC\\n\"");
  size_t c = body.find("event: result\nid: 3\ndata: {\"type\":\"result\"}\n\n");
  size_t d = body.find("event: end_of_execution\nid: 4\ndata: {\"type\":\"end_of_execution\"}\n\n");
  EXPECT_NE(a, std::string::npos) << body;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
  EXPECT_NE(d, std::string::npos) << body;
}

TEST(EventStreamWriter, KeepaliveWhenSilent) {
  Loopback lb;
  api::EventStream::Options o;
  o.keepalive_s = 0.1;
  auto es = api::EventStream::Create(*lb.server, lb.server, o, [] {});
  es->Begin(200, {}, false);
  lb.RunUntil([] { return false; }, 0.45);
  bool done = false;
  es->End("end_of_execution", R"({"type":"end_of_execution"})", [&](bool) {
    done = true;
    lb.server->socket().shutdown(tcp::socket::shutdown_both);
  });
  ASSERT_TRUE(lb.RunUntil([&] { return done; }));
  std::string body = ParseChunked(lb.ReadAll(), nullptr);
  size_t n = 0;
  for (size_t at = body.find("{\"type\":\"keepalive\"}\n"); at != std::string::npos;
       at = body.find("{\"type\":\"keepalive\"}\n", at + 1)) {
    ++n;
  }
  EXPECT_GE(n, 2u) << body;
  EXPECT_LE(n, 5u) << body;
}

TEST(EventStreamWriter, AClientThatDoesNotReadCostsABoundedQueue) {
  Loopback lb(/*client_rcvbuf=*/4096);
  api::EventStream::Options o;
  o.max_queued_bytes = 64 * 1024;
  o.write_timeout_s = 1;
  bool gone = false;
  auto es = api::EventStream::Create(*lb.server, lb.server, o, [&] { gone = true; });
  es->Begin(200, {}, false);
  const std::string line(1000, 'x');
  size_t max_queued = 0;
  // 20 MB of output, far more than the kernel's socket buffers hold.
  for (int i = 0; i < 20000; ++i) {
    es->Output("stdout", line);
    max_queued = std::max(max_queued, es->queued_bytes());
    if (i % 100 == 0) lb.io.poll();
  }
  // The waiting events (the bound, plus one into an empty queue) and the write in flight.
  EXPECT_LE(max_queued, 2 * (o.max_queued_bytes + 2 * 1024));
  EXPECT_GT(es->dropped_events(), 1000u);
  EXPECT_EQ(es->dropped_bytes() % 1000, 0u);
  EXPECT_NE(es->StatsJson().find("\"dropped_events\":"), std::string::npos);
  // The client never reads: the pending write times out and the client counts as gone.
  ASSERT_TRUE(lb.RunUntil([&] { return gone; }, 10));
}

TEST(EventStreamWriter, ABoundSmallerThanOneEventStillCarriesAReadingClient) {
  Loopback lb;
  api::EventStream::Options o;
  o.max_queued_bytes = 1024;
  auto es = api::EventStream::Create(*lb.server, lb.server, o, [] {});
  es->Begin(200, {}, false);
  const std::string big(64 * 1024, 'z');  // one read of output, far over the bound
  for (int i = 0; i < 5; ++i) {
    es->Output("stdout", big);
    ASSERT_TRUE(lb.RunUntil([&] { return es->queued_bytes() == 0; }));
  }
  EXPECT_EQ(es->dropped_events(), 0u);
  EXPECT_EQ(es->StatsJson(), "");
}

TEST(EventStreamWriter, AClientThatLeavesIsNoticed) {
  Loopback lb;
  bool gone = false;
  auto es = api::EventStream::Create(*lb.server, lb.server, {}, [&] { gone = true; });
  es->Begin(200, {}, false);
  lb.client.close();
  const std::string line(1000, 'x');
  // Writes to a closed peer fail (a reset after the first one).
  ASSERT_TRUE(lb.RunUntil([&] {
    es->Event("stdout", line);
    return gone;
  }));
  // Nothing more is queued or written; End reports the loss.
  EXPECT_FALSE(es->Event("stdout", line));
  bool done = false, ok = true;
  es->End("end_of_execution", "{}", [&](bool b) {
    done = true;
    ok = b;
  });
  ASSERT_TRUE(lb.RunUntil([&] { return done; }));
  EXPECT_FALSE(ok);
}

TEST(EventStreamWriter, NothingIsWrittenOnceTheOwnerIsGone) {
  Loopback lb;
  bool gone = false;
  std::weak_ptr<beast::tcp_stream> weak = lb.server;
  auto keep = lb.server;  // the stream itself stays valid; only the owner handle expires
  auto owner = std::make_shared<int>(0);
  auto es = api::EventStream::Create(*keep, owner, {}, [&] { gone = true; });
  owner.reset();
  es->Begin(200, {}, false);
  EXPECT_TRUE(gone);
  EXPECT_FALSE(es->Event("stdout", "{}"));
}

}  // namespace
}  // namespace airlock
