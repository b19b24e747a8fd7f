// The streaming form of an execute response (docs/api.md "Streaming"): E2B's
// line protocol (research/ecosystem.md §2.1), one JSON object per event, framed
// as NDJSON lines or as server-sent events. Pure functions: no I/O, no clock
// (the caller passes the time), so the HTTP writer (api/event_stream.h) and
// the fuzz target share them.
//
//   StreamFormat f = NegotiateStreamFormat(accept_header);     // kNone: plain JSON
//   Utf8Carry carry;
//   std::string text = carry.Take(bytes);                      // whole characters only
//   std::string frame = FrameEvent(f, "stdout", OutputEvent("stdout", text, ts), seq);
//   for (const StreamEvent& e : FinalEvents(response)) ...     // results, error
//   FrameEvent(f, "end_of_execution", EndOfExecutionEvent(V1ExecuteToJson(response), extra), seq);
//
// Every event object is one line of valid UTF-8 (bytes that are not UTF-8 are
// replaced with U+FFFD, as the non-streaming encoders do).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/execute.h"

namespace airlock::model {

// kConnect: Connect's server-streaming framing (model/connect.h): each event
// is one enveloped message, the end event ("end_stream") flagged as the
// stream's end; never negotiated from Accept (the envd routes choose it).
enum class StreamFormat { kNone, kNdjson, kSse, kConnect };

// The format an `Accept` header asks for: kNdjson when it lists
// application/x-ndjson (or application/ndjson), kSse for text/event-stream,
// kNone otherwise (the plain JSON response). A media range with q=0 does not count; when both are listed the
// one with the higher q wins, NDJSON on a tie. Wildcards (*/*) mean kNone.
// Case-insensitive; bounded work (the header is at most the server's header
// limit).
StreamFormat NegotiateStreamFormat(std::string_view accept);

// The Content-Type of a stream: "application/x-ndjson" or
// "text/event-stream; charset=utf-8" ("" for kNone).
const char* StreamContentType(StreamFormat format);

// Output bytes cut into whole UTF-8 characters: a multibyte character split
// across two reads is held back (at most 3 bytes) until the rest arrives, so
// that each chunk converts on its own exactly as the whole output would.
// Invalid bytes pass through (the encoder replaces them).
class Utf8Carry {
 public:
  // The bytes of `carry + data` up to the last character boundary; the rest
  // (an incomplete sequence at the very end) is kept for the next call.
  std::string Take(std::string_view data);
  // What is held back (the output ended inside a character).
  std::string Flush();
  size_t pending() const { return pending_.size(); }

 private:
  std::string pending_;
};

// An RFC 3339 UTC time with microseconds, as E2B writes it:
// "2026-08-21T10:00:00.123456Z".
std::string StreamTimestamp(std::chrono::system_clock::time_point t);

// {"type":"stdout"|"stderr","text":...,"timestamp":...}
std::string OutputEvent(std::string_view stream, std::string_view text, std::string_view timestamp);
// {"type":"keepalive"}
std::string KeepaliveEvent();

// One event: its type (the SSE `event:` name) and its JSON object.
struct StreamEvent {
  std::string type;
  std::string json;
};

// The events a finished run adds before end_of_execution: one "result" per
// display result in order, the main result last ({"type":"result",
// "is_main_result":..., "data":{mime: value}, "text": text/plain when there
// is one}), then "error" ({"type":"error","name","value","traceback"}) when
// the code raised.
std::vector<StreamEvent> FinalEvents(const ExecuteResponse& response);

// The last event: the whole non-streaming response object (`response_json`,
// as V1ExecuteToJson wrote it, so whatever that carries is carried) with
// "type":"end_of_execution" first and, when `stream_json` is not empty, a
// "stream" member holding it (what the stream itself dropped).
std::string EndOfExecutionEvent(std::string_view response_json, std::string_view stream_json);
// The same for any last event of a stream: "type":`type` (a plain word, not
// escaped) first, then the members of `response_json` (a command's end:
// "end").
std::string EndEvent(std::string_view type, std::string_view response_json, std::string_view stream_json);
// The "stream" member: {"dropped_events":n,"dropped_bytes":n} (events of
// output the stream did not carry because the client read too slowly).
std::string StreamStatsJson(uint64_t dropped_events, uint64_t dropped_bytes);

// One event framed for the wire: NDJSON `json + "\n"`; SSE
// "event: <type>\nid: <seq>\ndata: <json>\n\n" (the JSON is one line).
std::string FrameEvent(StreamFormat format, std::string_view type, std::string_view json, uint64_t seq);

}  // namespace airlock::model
