// The phases of the request pipeline (api/pipeline.h), each on its own: they
// take the head of a request as plain data, so no socket is needed. Also the
// budgets of phases 1 and 6 (api/admission.h), the run slots and the pages.
#include <gtest/gtest.h>

#include <algorithm>

#include "api/admission.h"
#include "api/doors.h"
#include "api/metrics.h"
#include "api/pipeline.h"
#include "api/query.h"
#include "api/run_slots.h"

namespace airlock::api {
namespace {

const char* kRunToken = "run-token-0123456789abcdef";
const char* kApproveToken = "approve-token-0123456789abcd";

RequestHead Head(std::string method, std::string path, Door door = Door::kApi) {
  RequestHead h;
  h.door = door;
  h.method = std::move(method);
  h.path = std::move(path);
  h.host = "127.0.0.1:8000";
  return h;
}

RequestGate Gate0() {
  auto g = RequestGate::Create({{}, {}}, {"127.0.0.1"});
  EXPECT_TRUE(g.ok());
  return std::move(*g);
}

Authenticator Tokens() {
  auto a = Authenticator::Parse(std::string("agent:") + kRunToken + "\nalice:" + kApproveToken + ":approve\n", "t");
  EXPECT_TRUE(a.ok());
  return std::move(*a);
}

const RouteTable& Api() {
  static const RouteTable t = ApiRouteTable();
  return t;
}

// --- 2. gate -----------------------------------------------------------------

TEST(PhaseGate, HostOriginAndContentType) {
  RequestGate gate = Gate0();
  RequestHead h = Head("POST", "/v1/execute");
  h.has_body = true;
  h.content_type = "application/json";
  EXPECT_FALSE(Gate(gate, h, Lookup(Api(), h)));
  h.content_type = "text/plain";
  auto r = Gate(gate, h, Lookup(Api(), h));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kUnsupportedMediaType);
  h.content_type = "application/json";
  h.host = "evil.example:8000";
  r = Gate(gate, h, Lookup(Api(), h));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kMisdirected);
  h.host = "127.0.0.1:8000";
  h.origin = "https://evil.example";
  r = Gate(gate, h, Lookup(Api(), h));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kForbidden);
  // An upload's body is bytes, not JSON; the probes are not gated at all.
  RequestHead put = Head("PUT", "/v1/sessions/s1-x/files/a.bin");
  put.has_body = true;
  put.content_type = "application/octet-stream";
  EXPECT_FALSE(Gate(gate, put, Lookup(Api(), put)));
  RequestHead e2b = Head("POST", "/files", Door::kE2bInterpreter);
  e2b.has_body = true;
  e2b.content_type = "multipart/form-data; boundary=x";
  EXPECT_FALSE(Gate(gate, e2b, Lookup(E2bRouteTable(), e2b)));
  RequestHead probe = Head("GET", "/healthz");
  probe.host = "evil.example";
  EXPECT_FALSE(Gate(gate, probe, Lookup(Api(), probe)));
}

// --- 3. authenticate ---------------------------------------------------------

TEST(PhaseAuthenticate, TokensRolesAndTheRoutesThatNeedNone) {
  Authenticator auth = Tokens();
  Identity who;
  RequestHead h = Head("GET", "/v1/sessions");
  auto r = Authenticate(auth, h, Lookup(Api(), h), &who);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kUnauthorized);
  h.authorization = std::string("Bearer ") + kRunToken;
  EXPECT_FALSE(Authenticate(auth, h, Lookup(Api(), h), &who));
  EXPECT_EQ(who.name, "agent");
  EXPECT_TRUE(who.run);
  // An unknown path is refused for want of a token first (nothing about the
  // routes is told to a stranger).
  RequestHead nope = Head("GET", "/v1/nope");
  EXPECT_TRUE(Authenticate(auth, nope, Lookup(Api(), nope), &who));
  for (const char* open : {"/healthz", "/readyz", "/console", "/console/app.js"}) {
    RequestHead o = Head("GET", open);
    EXPECT_FALSE(Authenticate(auth, o, Lookup(Api(), o), &who)) << open;
  }
  // E2B's clients send X-Access-Token.
  RequestHead e2b = Head("GET", "/contexts", Door::kE2bInterpreter);
  e2b.access_token = kRunToken;
  EXPECT_FALSE(Authenticate(auth, e2b, Lookup(E2bRouteTable(), e2b), &who));
  // Without tokens everyone has every role.
  Authenticator none;
  EXPECT_FALSE(Authenticate(none, h, Lookup(Api(), h), &who));
  EXPECT_TRUE(who.run && who.approve);
}

// --- 4. route ----------------------------------------------------------------

TEST(PhaseMatch, NotFoundAndMethodNotAllowed) {
  RequestHead h = Head("GET", "/v1/nope");
  auto r = Match(Lookup(Api(), h), h);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kNotFound);
  h = Head("PUT", "/v1/execute");
  r = Match(Lookup(Api(), h), h);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kMethodNotAllowed);
  ASSERT_EQ(r->headers.size(), 1u);
  EXPECT_EQ(r->headers[0], (std::pair<std::string, std::string>{"Allow", "POST"}));
  h = Head("GET", "/v1/sessions/not/a/route");
  r = Match(Lookup(Api(), h), h);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.code, "session_not_found");
}

// --- 5. authorize ------------------------------------------------------------

TEST(PhaseAuthorize, RoleThenOwnerBeforeTheBody) {
  Identity agent{"agent", true, false}, alice{"alice", false, true};
  std::vector<std::string> asked;
  Owners owners;
  owners.session = [&](const std::string& id, const std::string& owner) -> std::optional<model::ApiError> {
    asked.push_back(id + "/" + owner);
    if (owner == "agent") return std::nullopt;
    return model::ApiError{model::ErrorKind::kNotFound, "no session", ""};
  };
  RequestHead put = Head("PUT", "/v1/sessions/s1-abc/files/x");
  RouteMatch m = Lookup(Api(), put);
  EXPECT_FALSE(Authorize(m, put, agent, true, owners));
  auto r = Authorize(m, put, Identity{"bob", true, false}, true, owners);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kNotFound);  // another's: as if it did not exist
  EXPECT_EQ(asked, (std::vector<std::string>{"s1-abc/agent", "s1-abc/bob"}));
  // The role first: an approver may not upload, and its target is not even looked up.
  r = Authorize(m, put, alice, true, owners);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kForbidden);
  EXPECT_EQ(asked.size(), 2u);
  RequestHead list = Head("GET", "/v1/approvals");
  r = Authorize(Lookup(Api(), list), list, agent, true, owners);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kForbidden);
  EXPECT_FALSE(Authorize(Lookup(Api(), list), list, agent, /*auth_enabled=*/false, owners));
  // MCP: the Mcp-Session-Id is the target when it is there (initialize has none).
  bool mcp_asked = false;
  owners.mcp_session = [&](const std::string&, const std::string&) -> std::optional<model::ApiError> {
    mcp_asked = true;
    return model::ApiError{model::ErrorKind::kNotFound, "Session not found", ""};
  };
  RequestHead mcp = Head("POST", "/mcp");
  EXPECT_FALSE(Authorize(Lookup(Api(), mcp), mcp, agent, true, owners));
  EXPECT_FALSE(mcp_asked);
  mcp.headers.mcp_session = "mcp-someone-elses";
  EXPECT_TRUE(Authorize(Lookup(Api(), mcp), mcp, agent, true, owners));
  EXPECT_TRUE(mcp_asked);
}

// --- 6. admit ----------------------------------------------------------------

TEST(PhaseAdmit, DeclaredLengthOverTheRoutesCapIs413OnTheHeader) {
  BodyCaps caps;
  caps.json = 1000;
  caps.upload = 10000;
  RequestHead h = Head("POST", "/v1/execute");
  h.has_body = true;
  h.content_length = 1001;
  const Route& execute = *Lookup(Api(), h).route;
  auto r = CheckBodySize(execute, h, caps);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kPayloadTooLarge);
  h.content_length = 1000;
  EXPECT_FALSE(CheckBodySize(execute, h, caps));
  RequestHead put = Head("PUT", "/v1/sessions/s1-x/files/a");
  put.has_body = true;
  put.content_length = 10001;
  EXPECT_FALSE(CheckBodySize(*Lookup(Api(), put).route, put, caps));  // the multipart slack
  put.content_length = 10000 + kMultipartSlack + 1;
  r = CheckBodySize(*Lookup(Api(), put).route, put, caps);
  ASSERT_TRUE(r);
  EXPECT_NE(r->error.message.find("--max-file"), std::string::npos);
  RequestHead get = Head("GET", "/v1/sessions");
  get.has_body = true;
  get.content_length = kNoBodyCap + 1;
  EXPECT_TRUE(CheckBodySize(*Lookup(Api(), get).route, get, caps));
}

TEST(PhaseAdmit, BodyBudgetsAndUploadSlotsAre429NamingTheQuota) {
  AdmissionOptions o;
  o.body_buffer_bytes = 3000;
  o.body_buffer_per_owner = 2000;
  o.uploads_per_owner = 2;
  o.per_owner = true;
  Admission budgets(o);
  BodyCaps caps;
  caps.json = 1000;
  RequestHead h = Head("POST", "/v1/execute");
  h.has_body = true;
  const Route& execute = *Lookup(Api(), h).route;
  Identity a{"a", true, false}, b{"b", true, false};
  h.content_length = 1000;
  AdmissionTicket t1, t2, t3, t4;
  EXPECT_FALSE(Admit(budgets, execute, h, a, caps, &t1));
  EXPECT_FALSE(Admit(budgets, execute, h, a, caps, &t2));
  auto r = Admit(budgets, execute, h, a, caps, &t3);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.kind, model::ErrorKind::kTooManyRequests);
  EXPECT_EQ(r->error.quota, "body_buffer_per_owner");
  EXPECT_FALSE(Admit(budgets, execute, h, b, caps, &t3));
  r = Admit(budgets, execute, h, b, caps, &t4);  // 3000 held server-wide
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.quota, "body_buffer");
  EXPECT_EQ(budgets.body_bytes_held(), 3000u);
  t1.Release();
  EXPECT_FALSE(Admit(budgets, execute, h, b, caps, &t4));
  // A chunked body (no length) holds its route's cap.
  AdmissionTicket t5;
  h.content_length.reset();
  t2.Release();
  t3.Release();
  t4.Release();
  EXPECT_FALSE(Admit(budgets, execute, h, a, caps, &t5));
  EXPECT_EQ(budgets.body_bytes_held(), 1000u);
  // Uploads: one buffer each, and a slot of the owner's.
  RequestHead put = Head("PUT", "/v1/sessions/s1-x/files/a");
  put.has_body = true;
  put.content_length = uint64_t{1} << 30;  // not what it holds
  const Route& upload = *Lookup(Api(), put).route;
  o.body_buffer_bytes = uint64_t{1} << 40;
  o.body_buffer_per_owner = uint64_t{1} << 40;
  Admission big(o);
  AdmissionTicket u1, u2, u3;
  EXPECT_FALSE(Admit(big, upload, put, a, caps, &u1));
  EXPECT_EQ(big.body_bytes_held(), kUploadBuffer);
  EXPECT_FALSE(Admit(big, upload, put, a, caps, &u2));
  r = Admit(big, upload, put, a, caps, &u3);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error.quota, "uploads_per_owner");
  EXPECT_NE(r->error.message.find("--max-uploads-per-owner"), std::string::npos);
  { AdmissionTicket moved = std::move(u1); }  // released with its last holder
  EXPECT_FALSE(Admit(big, upload, put, a, caps, &u3));
  // Without tokens there are no owners: only the server-wide budget binds.
  o.per_owner = false;
  Admission anonymous(o);
  AdmissionTicket x[4];
  for (auto& t : x) EXPECT_FALSE(Admit(anonymous, upload, put, a, caps, &t));
}

// --- 9. respond --------------------------------------------------------------

TEST(PhaseRespond, SandboxBytesGoOutAsAnAttachmentUnderCspSandbox) {
  const Route& file = *FindRoute(Api(), "GET", "/v1/sessions/s1-x/files/x.html").route;
  Reply r;
  r.content_type = "text/html";  // whatever a handler says, sandbox bytes are not a page
  r.file = std::make_shared<Reply::File>();
  r.file->name = "x\"\r\n<y>.html";
  HeaderList h = ReplyHeaders(&file, r, "req_1", {});
  auto get = [&](const std::string& k) {
    auto it = std::find_if(h.begin(), h.end(), [&](const auto& kv) { return kv.first == k; });
    return it == h.end() ? std::string("(none)") : it->second;
  };
  EXPECT_EQ(get("Content-Type"), "application/octet-stream");
  EXPECT_EQ(get("Content-Security-Policy"), "sandbox; default-src 'none'");
  EXPECT_EQ(get("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(get("Content-Disposition"), "attachment; filename=\"x___<y>.html\"; filename*=UTF-8''x%22%0D%0A%3Cy%3E.html");
  EXPECT_EQ(get("X-Request-Id"), "req_1");
  // A refusal of the same route is JSON, and every answer is nosniff.
  Reply err;
  h = ReplyHeaders(&file, err, "req_2", {});
  EXPECT_EQ(get("Content-Type"), "application/json");
  EXPECT_EQ(get("Content-Disposition"), "(none)");
  EXPECT_EQ(get("X-Content-Type-Options"), "nosniff");
  const Route& console = *FindRoute(Api(), "GET", "/console").route;
  h = ReplyHeaders(&console, err, "req_3", {});
  EXPECT_NE(get("Content-Security-Policy").find("script-src 'self'"), std::string::npos);
}

TEST(PhaseRespond, ARefusalHasItsDoorsShape) {
  model::ApiError e{model::ErrorKind::kNotFound, "nothing here", ""};
  Reply api = RefusalReply(Door::kApi, nullptr, e, {}, false, "req_1");
  EXPECT_EQ(api.status, 404);
  EXPECT_NE(api.body.find("\"error\":\"nothing here\""), std::string::npos) << api.body;
  Reply e2b = RefusalReply(Door::kE2bInterpreter, nullptr, e, {}, false, "req_1");
  EXPECT_EQ(e2b.body, R"({"code":404,"message":"nothing here"})");
  const Route& mcp = *FindRoute(Api(), "POST", "/mcp").route;
  Reply rpc = RefusalReply(Door::kApi, &mcp, e, {}, false, "req_1");
  EXPECT_NE(rpc.body.find("\"jsonrpc\":\"2.0\""), std::string::npos) << rpc.body;
  EXPECT_NE(rpc.body.find("-32001"), std::string::npos) << rpc.body;
  model::ApiError q = QuotaError("mcp_sessions", "--max-mcp-sessions", "full", 5);
  Reply quota = RefusalReply(Door::kApi, nullptr, q, {}, false, "req_1");
  EXPECT_EQ(quota.status, 429);
  EXPECT_NE(quota.body.find("\"quota\":\"mcp_sessions\""), std::string::npos) << quota.body;
  EXPECT_EQ(quota.headers[0], (std::pair<std::string, std::string>{"Retry-After", "5"}));
}

// --- 10. account -------------------------------------------------------------

TEST(PhaseAccount, OneRecordPerRequestButForTheProbes) {
  Metrics metrics;
  std::vector<model::AuditRecord> written;
  auto write = [&](const model::AuditRecord& r) { written.push_back(r); };
  Accounted a;
  a.label = "/v1/sessions";
  a.route = FindRoute(Api(), "GET", "/v1/sessions").route;
  a.status = 200;
  model::AuditRecord rec;
  rec.method = "GET";
  EXPECT_TRUE(Account(metrics, write, a, rec));
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].type, "request");
  EXPECT_EQ(written[0].verdict, "ok");
  EXPECT_EQ(written[0].http_status, 200);
  a.label = "/healthz";
  a.route = FindRoute(Api(), "GET", "/healthz").route;
  EXPECT_FALSE(Account(metrics, write, a, rec));
  EXPECT_EQ(written.size(), 1u);
  // Before routing (a 404, a 401): still one record.
  a.route = nullptr;
  a.label = "other";
  a.status = 404;
  EXPECT_TRUE(Account(metrics, write, a, rec));
  EXPECT_EQ(written.back().verdict, "invalid");
  a.status = 401;
  EXPECT_TRUE(Account(metrics, write, a, rec));
  EXPECT_EQ(written.back().verdict, "unauthorized");
  a.execution = true;
  a.status = 200;
  rec.verdict = "ran";
  EXPECT_TRUE(Account(metrics, write, a, rec));
  EXPECT_EQ(written.back().type, "execution");
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("airlock_http_requests_total{route=\"/healthz\",code=\"200\"} 1"), std::string::npos) << text;
}

// --- 1. the connection budget ------------------------------------------------

struct Conn : ConnectionBudget::Member {
  bool evicted = false;
  void Evict() override { evicted = true; }
};

TEST(ConnectionBudget, AnAddressPushesOutItsOwnWaitingConnectionsNeverABusyOne) {
  ConnectionBudget budget(/*max_connections=*/6, /*per_address=*/3);
  Conn honest_busy, honest_idle;
  ASSERT_TRUE(budget.Accept("10.0.0.1"));
  budget.Open(&honest_busy, "10.0.0.1");
  budget.Busy(&honest_busy);
  ASSERT_TRUE(budget.Accept("10.0.0.1"));
  budget.Open(&honest_idle, "10.0.0.1");
  budget.Waiting(&honest_idle);
  Conn flood[10];
  for (Conn& c : flood) {
    ASSERT_TRUE(budget.Accept("10.0.0.9"));
    budget.Open(&c, "10.0.0.9");
    budget.Waiting(&c);  // half a header, for ever
  }
  // The flooding address holds at most 3 waiting connections: the oldest went first.
  EXPECT_EQ(budget.waiting_from("10.0.0.9"), 3u);
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(flood[i].evicted) << i;
  for (int i = 7; i < 10; ++i) EXPECT_FALSE(flood[i].evicted) << i;
  EXPECT_FALSE(honest_idle.evicted);
  // The server's cap: a newcomer pushes out the oldest waiting connection of anyone,
  // never one whose request is being handled.
  Conn newcomer;
  ASSERT_TRUE(budget.Accept("10.0.0.2"));
  budget.Open(&newcomer, "10.0.0.2");
  ASSERT_TRUE(budget.Accept("10.0.0.3"));
  EXPECT_TRUE(honest_idle.evicted);
  EXPECT_FALSE(honest_busy.evicted);
  // Every connection busy: a new one is refused.
  ConnectionBudget small(2, 2);
  Conn a, b;
  small.Open(&a, "x");
  small.Open(&b, "y");
  EXPECT_FALSE(small.Accept("z"));
  EXPECT_EQ(AddressKey("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
  EXPECT_EQ(AddressKey("::ffff:10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(AddressKey("10.1.2.3"), "10.1.2.3");
}

// --- the run slots -----------------------------------------------------------

TEST(RunSlots, OneLimitAQueueApprovedRunsFirst) {
  RunSlots slots(2, 2);
  std::vector<std::string> started;
  auto start = [&](std::string name) { return [&started, name](bool granted) { started.push_back(name + (granted ? "" : "!")); }; };
  uint64_t t[6];
  EXPECT_EQ(slots.Take(start("a"), &t[0]), RunSlots::kStarted);
  EXPECT_EQ(slots.Take(start("b"), &t[1]), RunSlots::kStarted);
  EXPECT_EQ(slots.Take(start("c"), &t[2]), RunSlots::kQueued);
  EXPECT_EQ(slots.Take(start("d"), &t[3]), RunSlots::kQueued);
  EXPECT_EQ(slots.Take(start("e"), &t[4]), RunSlots::kFull);
  EXPECT_EQ(slots.Take(start("approved"), &t[5], RunSlots::Priority::kApproved), RunSlots::kQueued);
  EXPECT_TRUE(slots.Cancel(t[2]));
  EXPECT_FALSE(slots.Cancel(t[2]));
  slots.Release();
  slots.Release();
  EXPECT_EQ(started, (std::vector<std::string>{"a", "b", "approved", "d"}));
  EXPECT_EQ(slots.running(), 2u);
  EXPECT_EQ(slots.Take(start("f"), &t[0]), RunSlots::kQueued);
  slots.Drain();
  EXPECT_EQ(started.back(), "f!");
  EXPECT_EQ(slots.Take(start("g"), &t[0]), RunSlots::kFull);
}

// --- lists -------------------------------------------------------------------

TEST(Pages, LimitAndCursor) {
  PageRequest p;
  EXPECT_FALSE(ParsePage("", 50, 200, &p));
  EXPECT_EQ(p.limit, 50u);
  EXPECT_EQ(p.cursor, "");
  EXPECT_FALSE(ParsePage("cursor=s1-abc&limit=2", 50, 200, &p));
  EXPECT_EQ(p.limit, 2u);
  EXPECT_EQ(p.cursor, "s1-abc");
  for (const char* bad : {"limit=0", "limit=201", "limit=x", "limit=", "limit=1e3", "cursor=%zz"}) {
    EXPECT_TRUE(ParsePage(bad, 50, 200, &p)) << bad;
  }
  EXPECT_EQ(QueryParam("a=1&path=x%2Fy+z", "path"), "x/y z");
  EXPECT_EQ(CursorJson(std::nullopt), "null");
  EXPECT_EQ(CursorJson("12"), "\"12\"");
}

}  // namespace
}  // namespace airlock::api
