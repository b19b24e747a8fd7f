#include "api/pipeline.h"

#include <algorithm>
#include <cctype>

#include "api/audit_log.h"
#include "api/error_mapping.h"
#include "api/metrics.h"
#include "model/connect.h"
#include "model/e2b.h"
#include "model/mcp.h"

namespace airlock::api {
namespace {

Refusal Refuse(model::ErrorKind kind, std::string message) { return {{kind, std::move(message), ""}, {}}; }

// Content-Disposition's filename (RFC 6266): a plain ASCII fallback, and the
// name itself percent-encoded as UTF-8 (filename*).
std::string Disposition(const std::string& name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string plain, encoded;
  for (unsigned char c : name) {
    plain += (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '%' && c != ';') ? static_cast<char>(c) : '_';
    if (std::isalnum(c) || c == '.' || c == '-' || c == '_') {
      encoded += static_cast<char>(c);
    } else {
      encoded += '%';
      encoded += kHex[c >> 4];
      encoded += kHex[c & 15];
    }
  }
  if (plain.empty()) plain = encoded = "download";
  return "attachment; filename=\"" + plain + "\"; filename*=UTF-8''" + encoded;
}

// The console's answers (ReplyPolicy::kConsole): scripts and styles from
// this origin only, no inline code, no framing. img-src data: the figures a
// run returns are shown as data: URLs of the PNG bytes (never HTML).
// connect-src 'self': the page talks to this server only.
constexpr const char* kConsoleCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// A request's verdict in its audit record when its handler gave none.
const char* VerdictOf(int status) {
  if (status < 400) return "ok";
  switch (status) {
    case 401: return "unauthorized";
    case 403:
    case 421: return "refused";
    case 429: return "overloaded";
    case 499: return "client_gone";
    case 503: return "unavailable";
    default: return status >= 500 ? "error" : "invalid";
  }
}

}  // namespace

RouteMatch Lookup(const RouteTable& table, const RequestHead& h) { return FindRoute(table, h.method, h.path); }

std::optional<Refusal> Gate(const RequestGate& gate, const RequestHead& h, const RouteMatch& m) {
  if (m.path_route && m.path_route->role == Role::kOpen) return std::nullopt;
  // A POST body must be declared JSON, except an upload's and a Connect
  // stream's (one enveloped message: application/connect+json).
  const bool connect_stream = m.path_route && m.path_route->reply == ReplyPolicy::kConnectStream;
  const bool json_body = h.method == "POST" && h.has_body && !connect_stream &&
                         !(m.path_route && m.path_route->body == BodyPolicy::kUpload);
  auto refusal = gate.Check(h.method, h.host, h.origin, h.content_type, json_body);
  if (!refusal && connect_stream && h.method == "POST" && MediaType(h.content_type) != model::kConnectStreamJson) {
    return Refuse(model::ErrorKind::kUnsupportedMediaType,
                  std::string("a streaming call's body is one Connect envelope, sent with 'Content-Type: ") +
                      model::kConnectStreamJson + "'");
  }
  if (!refusal) return std::nullopt;
  model::ErrorKind kind = refusal->status == 421   ? model::ErrorKind::kMisdirected
                          : refusal->status == 415 ? model::ErrorKind::kUnsupportedMediaType
                                                   : model::ErrorKind::kForbidden;
  return Refuse(kind, refusal->message);
}

bool IsPreflight(const RequestHead& h) { return h.method == "OPTIONS"; }

Reply PreflightReply(const RequestGate& gate, const RequestHead& h) {
  // A preflight from an allowed origin gets the CORS answer; anything else
  // (no Origin: a plain OPTIONS) only what the server allows.
  Reply r;
  r.status = 204;
  r.content_type = "text/plain";
  r.headers = gate.PreflightHeaders(h.origin);
  r.headers.emplace_back("Allow", "GET, POST, PUT, DELETE, OPTIONS");
  return r;
}

std::optional<Refusal> Authenticate(const Authenticator& auth, const RequestHead& h, const RouteMatch& m,
                                    Identity* who) {
  if (!auth.enabled()) {
    *who = Identity{"", true, true};
    return std::nullopt;
  }
  // The probes and the console's static files carry no data: no token.
  if (m.path_route && (m.path_route->role == Role::kOpen || m.path_route->role == Role::kNoToken)) {
    *who = Identity{"", false, false};
    return std::nullopt;
  }
  // E2B's clients send their token as X-Access-Token.
  std::string_view key = h.api_key;
  if (h.door != Door::kApi && key.empty()) key = h.access_token;
  auto id = auth.Identify(h.authorization, key);
  if (!id) {
    return Refuse(model::ErrorKind::kUnauthorized,
                  std::string("missing or wrong token: send 'Authorization: Bearer <token>' or 'X-API-Key: <token>'") +
                      (h.door != Door::kApi ? " (or X-Access-Token)" : ""));
  }
  *who = *id;
  return std::nullopt;
}

std::optional<Refusal> Match(const RouteMatch& m, const RequestHead& h) {
  if (m.route) return std::nullopt;
  if (!m.allow.empty()) {
    Refusal r = Refuse(model::ErrorKind::kMethodNotAllowed, "method not allowed; use " + m.allow);
    r.headers.emplace_back("Allow", m.allow);
    return r;
  }
  if (h.door != Door::kApi) {
    return Refuse(model::ErrorKind::kNotFound,
                  "no such endpoint: " + h.path.substr(0, 256) +
                      " (airlock's E2B listener serves /execute, /contexts, /files and /health; docs/api.md)");
  }
  Refusal r = Refuse(model::ErrorKind::kNotFound, "no such endpoint: " + h.path.substr(0, 256) + " (see docs/api.md)");
  // Below /v1/sessions/ a path no route has names no session of the caller's
  // (a malformed id): what a session client handles is this code.
  if (h.path.rfind("/v1/sessions/", 0) == 0) r.error.code = "session_not_found";
  return r;
}

std::optional<Refusal> Authorize(const RouteMatch& m, const RequestHead& h, const Identity& who, bool auth_enabled,
                                 const Owners& owners) {
  const Route& r = *m.route;
  if (auth_enabled) {
    if (r.role == Role::kRun && !who.run) {
      return Refuse(model::ErrorKind::kForbidden,
                    "token '" + who.name + "' may approve, not run code (its role in the tokens file)");
    }
    if (r.role == Role::kApprove && !who.approve) {
      return Refuse(model::ErrorKind::kForbidden,
                    "token '" + who.name +
                        "' may not see or decide approvals: give it the approve role in the tokens file "
                        "(name:token:approve or name:token:run+approve)");
    }
  }
  std::optional<model::ApiError> refused;
  switch (r.owner) {
    case OwnerRule::kSession:
      if (owners.session) refused = owners.session(m.param, who.name);
      break;
    case OwnerRule::kApproval:
      if (owners.approval) refused = owners.approval(m.param, who);
      break;
    case OwnerRule::kMcpSession:
      if (owners.mcp_session && !h.headers.mcp_session.empty()) {
        refused = owners.mcp_session(h.headers.mcp_session, who.name);
      }
      break;
    case OwnerRule::kContext:
      if (owners.context) refused = owners.context(m.param, who.name);
      break;
    default:
      break;
  }
  if (refused) return Refusal{*refused, {}};
  return std::nullopt;
}

uint64_t BodyCap(const Route& r, const BodyCaps& caps) {
  switch (r.body) {
    case BodyPolicy::kJson: return r.max_json > 0 ? std::min(r.max_json, caps.json) : caps.json;
    case BodyPolicy::kUpload: return caps.upload + kMultipartSlack;
    default: return kNoBodyCap;
  }
}

std::optional<Refusal> CheckBodySize(const Route& r, const RequestHead& h, const BodyCaps& caps) {
  const uint64_t cap = BodyCap(r, caps);
  if (!h.content_length || *h.content_length <= cap) return std::nullopt;
  std::string why = "request body is larger than " + std::to_string(cap) + " bytes";
  if (r.body == BodyPolicy::kUpload) why += " (--max-file)";
  if (r.body == BodyPolicy::kNone) why += ": this route takes no body";
  return Refuse(model::ErrorKind::kPayloadTooLarge, why);
}

std::optional<Refusal> Admit(Admission& budgets, const Route& r, const RequestHead& h, const Identity& who,
                             const BodyCaps& caps, AdmissionTicket* ticket) {
  uint64_t bytes = 0;
  if (h.has_body) {
    // An upload holds one buffer whatever its size; another body, all of
    // itself (what it says it is, or its cap when it does not say).
    bytes = r.body == BodyPolicy::kUpload ? kUploadBuffer : h.content_length.value_or(BodyCap(r, caps));
  }
  if (auto refused = budgets.Admit(who.name, bytes, r.body == BodyPolicy::kUpload, ticket)) {
    return Refusal{*refused, {}};
  }
  return std::nullopt;
}

HeaderList ReplyHeaders(const Route* route, const Reply& reply, const std::string& request_id,
                        const HeaderList& cors) {
  HeaderList h;
  h.emplace_back("Cache-Control", "no-store");
  h.emplace_back("X-Request-Id", request_id);
  // Never sniffed, whatever the answer: a browser renders nothing of ours as
  // another type than the one we name.
  h.emplace_back("X-Content-Type-Options", "nosniff");
  for (const auto& kv : cors) h.push_back(kv);
  std::string content_type = reply.content_type;
  const ReplyPolicy policy = route ? route->reply : ReplyPolicy::kJson;
  if (policy == ReplyPolicy::kSandboxBytes && reply.file) {
    // Bytes a sandbox wrote are the sandbox's, not ours: a download, never a
    // page of the API's origin (an x.html or x.svg would run script there,
    // and the Host and Origin rules would let its requests through). `sandbox`
    // gives it an opaque origin even where a browser did render it.
    content_type = "application/octet-stream";
    h.emplace_back("Content-Disposition", Disposition(reply.file->name));
    h.emplace_back("Content-Security-Policy", "sandbox; default-src 'none'");
    h.emplace_back("Cross-Origin-Resource-Policy", "same-origin");
  }
  if (policy == ReplyPolicy::kConsole) {
    h.emplace_back("Content-Security-Policy", kConsoleCsp);
    h.emplace_back("X-Frame-Options", "DENY");
    h.emplace_back("Referrer-Policy", "no-referrer");
    h.emplace_back("Cross-Origin-Opener-Policy", "same-origin");
    h.emplace_back("Cross-Origin-Resource-Policy", "same-origin");
  }
  h.emplace_back("Content-Type", content_type);
  for (const auto& kv : reply.headers) h.push_back(kv);
  return h;
}

Reply RefusalReply(Door door, const Route* shape, const model::ApiError& error,
                   const std::vector<model::Violation>& violations, bool compat, const std::string& request_id) {
  ErrorReply er = MakeErrorReply(error, violations, compat, request_id);
  Reply r;
  r.status = er.status;
  r.headers = std::move(er.headers);
  r.error = error;
  r.violations = violations;
  // A body that is not a Connect stream's is answered as Connect answers a
  // client that does not speak it: 415, not a stream.
  const bool not_a_stream = error.kind == model::ErrorKind::kUnsupportedMediaType;
  if (shape && (shape->reply == ReplyPolicy::kConnect || (shape->reply == ReplyPolicy::kConnectStream && not_a_stream))) {
    r.status = not_a_stream ? 415 : model::ConnectHttpStatus(model::ConnectCode(error));
    r.body = model::ConnectErrorBody(error);
  } else if (shape && shape->reply == ReplyPolicy::kConnectStream) {
    // A stream's error is its end message; the status says the stream began.
    r.status = 200;
    r.content_type = model::kConnectStreamJson;
    r.body = model::ConnectFrame(model::ConnectEndStream(&error), /*end_stream=*/true);
  } else if (shape && shape->reply == ReplyPolicy::kJsonRpc) {
    // MCP's clients read JSON-RPC errors, whatever the status.
    int code = r.status == 404 ? -32001 : -32000;
    std::string message = error.message;
    if (!error.quota.empty()) message += " [quota " + error.quota + "]";
    r.body = model::McpErrorLine("null", code, message);
  } else if (door != Door::kApi) {
    r.body = model::E2bErrorBody(error.message, r.status);
  } else {
    r.body = std::move(er.body);
  }
  return r;
}

bool Account(Metrics& metrics, const std::function<void(const model::AuditRecord&)>& write, const Accounted& a,
             model::AuditRecord record) {
  metrics.CountHttp(a.label, a.status);
  if (a.route && a.route->account == Accounting::kNone) return false;
  record.type = a.execution ? "execution" : "request";
  if (record.http_status == 0) record.http_status = a.status;
  if (record.verdict.empty()) record.verdict = VerdictOf(a.status);
  record.client_gone = record.client_gone || a.client_gone;
  record.time = NowRfc3339();
  if (write) write(record);
  return true;
}

const char* RejectReason(model::ErrorKind kind) {
  switch (kind) {
    case model::ErrorKind::kPolicy: return "policy";
    case model::ErrorKind::kPayloadTooLarge: return "too_large";
    case model::ErrorKind::kTooManyRequests: return "overloaded";
    case model::ErrorKind::kUnauthorized: return "unauthorized";
    case model::ErrorKind::kUnavailable: return "unavailable";
    case model::ErrorKind::kMisdirected: return "host";
    case model::ErrorKind::kForbidden: return "origin";
    case model::ErrorKind::kUnsupportedMediaType: return "media_type";
    default: return "invalid";
  }
}

}  // namespace airlock::api
