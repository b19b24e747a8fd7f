#include "api/route.h"

#include <set>

namespace airlock::api {
namespace {

// "/a/{id}/b" -> {"a", "{id}", "b"}; a leading '/' is dropped.
std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (true) {
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

bool IsParam(std::string_view seg) { return seg.size() > 2 && seg.front() == '{' && seg.back() == '}'; }
bool IsTail(std::string_view seg) { return IsParam(seg) && seg.substr(seg.size() - 4) == "...}"; }

// Whether `path` fits `pattern`; the {name} and {name...} parts go to *param and *tail.
bool Fits(std::string_view pattern, std::string_view path, std::string* param, std::string* tail) {
  if (path.empty() || path.front() != '/') return false;
  std::vector<std::string_view> want = Segments(pattern);
  std::string_view rest = path.substr(1);
  for (size_t i = 0; i < want.size(); ++i) {
    std::string_view w = want[i];
    if (IsTail(w)) {
      if (rest.empty()) return false;
      *tail = std::string(rest);
      return true;
    }
    size_t slash = rest.find('/');
    std::string_view seg = rest.substr(0, slash);
    const bool last = i + 1 == want.size();
    if (IsParam(w)) {
      if (seg.empty()) return false;
      *param = std::string(seg);
    } else if (seg != w) {
      return false;
    }
    if (last) return slash == std::string_view::npos;
    if (slash == std::string_view::npos) return false;
    rest.remove_prefix(slash + 1);
  }
  return false;
}

}  // namespace

RouteMatch FindRoute(const RouteTable& table, std::string_view method, std::string_view path) {
  RouteMatch m;
  std::set<std::string> allow;
  for (const Route& r : table.routes) {
    std::string param, tail;
    if (!Fits(r.pattern, path, &param, &tail)) continue;
    if (!m.path_route) {
      m.path_route = &r;
      m.label = std::string(table.label_prefix) + (r.name ? r.name : r.pattern);
    }
    if (method == r.method && !m.route) {
      m.route = &r;
      m.path_route = &r;
      m.param = std::move(param);
      m.tail = std::move(tail);
      m.label = std::string(table.label_prefix) + (r.name ? r.name : r.pattern);
    }
    allow.insert(r.method);
  }
  if (m.route) {
    m.allow.clear();
    return m;
  }
  for (const std::string& a : allow) m.allow += (m.allow.empty() ? "" : ", ") + a;
  if (!m.path_route) m.label = std::string(table.label_prefix) + "other";
  return m;
}

std::string CheckTable(const RouteTable& table) {
  std::string problems;
  std::set<std::pair<std::string, std::string>> seen;
  for (const Route& r : table.routes) {
    std::string where = std::string(table.door) + " " + (r.method ? r.method : "?") + " " +
                        (r.pattern ? r.pattern : "?") + ": ";
    auto bad = [&](const std::string& why) { problems += where + why + "\n"; };
    if (!r.method || !r.pattern || r.pattern[0] != '/') {
      bad("a method and a pattern starting with '/'");
      continue;
    }
    if (!seen.insert({r.method, r.pattern}).second) bad("two rows with this method and pattern");
    if (r.role == Role::kUnset) bad("no role");
    if (r.owner == OwnerRule::kUnset) bad("no owner rule");
    if (r.body == BodyPolicy::kUnset) bad("no body policy");
    if (r.runs_on == RunsOn::kUnset) bad("no place to run (runs_on)");
    if (r.reply == ReplyPolicy::kUnset) bad("no reply policy");
    if (r.account == Accounting::kUnset) bad("no accounting");
    if (r.runs_on == RunsOn::kWorker && (!r.on_worker || r.on_loop)) bad("runs on a worker: on_worker only");
    if (r.runs_on != RunsOn::kWorker && r.runs_on != RunsOn::kUnset && (!r.on_loop || r.on_worker)) {
      bad("runs on the loop or a driver: on_loop only");
    }
    // An upload is read by its handler once it opened the destination: a driver.
    if (r.body == BodyPolicy::kUpload && r.runs_on != RunsOn::kDriver) bad("an upload must be driven (kDriver)");
    int params = 0, tails = 0;
    for (std::string_view seg : Segments(r.pattern)) {
      if (IsTail(seg)) ++tails;
      else if (IsParam(seg)) ++params;
    }
    if (params > 1 || tails > 1) bad("at most one {name} and one {name...}");
    // Owner rules that read the path need its {name}.
    if ((r.owner == OwnerRule::kSession || r.owner == OwnerRule::kApproval || r.owner == OwnerRule::kContext) &&
        params == 0) {
      bad(std::string("owner rule ") + OwnerRuleName(r.owner) + " needs a {name} in the pattern");
    }
    if (r.role == Role::kOpen && (r.owner != OwnerRule::kNone || r.body != BodyPolicy::kNone)) {
      bad("an open route (no token, no gate) may have no target and no body");
    }
    if (r.owner == OwnerRule::kInBody && r.body != BodyPolicy::kJson) bad("an owner in the body needs a JSON body");
    if (r.max_json > 0 && r.body != BodyPolicy::kJson) bad("a JSON cap on a route without a JSON body");
    // A route that parses its body on the loop must say it is small.
    if (r.body == BodyPolicy::kJson && r.runs_on == RunsOn::kLoop && r.max_json == 0) {
      bad("a JSON body parsed on the loop needs a small cap (SmallJson)");
    }
    if (r.reply == ReplyPolicy::kSandboxBytes && r.runs_on == RunsOn::kLoop) {
      bad("sandbox bytes are read from a file: not on the loop");
    }
  }
  return problems;
}

const char* RoleName(Role r) {
  switch (r) {
    case Role::kUnset: return "unset";
    case Role::kOpen: return "open";
    case Role::kNoToken: return "no token";
    case Role::kAny: return "any token";
    case Role::kRun: return "run";
    case Role::kApprove: return "approve";
  }
  return "?";
}

const char* OwnerRuleName(OwnerRule o) {
  switch (o) {
    case OwnerRule::kUnset: return "unset";
    case OwnerRule::kNone: return "none";
    case OwnerRule::kCaller: return "caller's own";
    case OwnerRule::kSession: return "session {id}";
    case OwnerRule::kApproval: return "approval {id}";
    case OwnerRule::kMcpSession: return "Mcp-Session-Id";
    case OwnerRule::kContext: return "context {id}";
    case OwnerRule::kInBody: return "in the body";
  }
  return "?";
}

const char* BodyPolicyName(BodyPolicy b) {
  switch (b) {
    case BodyPolicy::kUnset: return "unset";
    case BodyPolicy::kNone: return "none";
    case BodyPolicy::kJson: return "JSON";
    case BodyPolicy::kUpload: return "upload (streamed)";
  }
  return "?";
}

const char* RunsOnName(RunsOn r) {
  switch (r) {
    case RunsOn::kUnset: return "unset";
    case RunsOn::kLoop: return "loop";
    case RunsOn::kWorker: return "worker";
    case RunsOn::kDriver: return "driver";
  }
  return "?";
}

const char* ReplyPolicyName(ReplyPolicy r) {
  switch (r) {
    case ReplyPolicy::kUnset: return "unset";
    case ReplyPolicy::kJson: return "JSON";
    case ReplyPolicy::kText: return "text";
    case ReplyPolicy::kConsole: return "console";
    case ReplyPolicy::kSandboxBytes: return "sandbox bytes";
    case ReplyPolicy::kRun: return "run (JSON or events)";
    case ReplyPolicy::kJsonRpc: return "JSON-RPC";
    case ReplyPolicy::kConnect: return "Connect (unary)";
    case ReplyPolicy::kConnectStream: return "Connect (server stream)";
  }
  return "?";
}

const char* AccountingName(Accounting a) {
  switch (a) {
    case Accounting::kUnset: return "unset";
    case Accounting::kNone: return "metrics";
    case Accounting::kRequest: return "request record";
    case Accounting::kRun: return "execution record";
  }
  return "?";
}

}  // namespace airlock::api
