"""GET /v1/tools (issue 12): the function-calling tool definitions for OpenAI, Anthropic and
MCP, each schema validated as JSON Schema with Debian's python3-jsonschema, a realistic tool
call of each validated against it (and a broken one refused), and the tool calls a model
makes turned into airlock requests as docs/agents.md shows, run for real.
"""

import json
import unittest

from airlock_server import AirlockServer

try:
    import jsonschema
except ImportError:  # scripts/setup.sh installs python3-jsonschema
    jsonschema = None

server = None
FORMATS = ("openai", "openai-responses", "anthropic", "mcp")

# What a model realistically sends for each tool (session ids as create_session returns them).
SID = "s1-ab12cd34-0123456789abcdef0123456789abcdef"
CALLS = {
    "execute_python": [{"code": "import math\nprint(math.sqrt(2))"},
                       {"code": "x = 1", "session_id": SID, "timeout_seconds": 20},
                       {"code": "1 + 1", "profile": "minimal"}],
    "create_session": [{}, {"profile": "data-science"}],
    "close_session": [{"session_id": SID}],
    "upload_file": [{"session_id": SID, "path": "data/in.csv", "content": "a,b\n1,2\n"},
                    {"session_id": SID, "path": "img.png", "content": "iVBORw0KGgo=", "encoding": "base64"}],
    "run_command": [{"session_id": SID, "command": "ls -la && wc -l data/in.csv"},
                    {"session_id": SID, "command": "make test", "timeout_seconds": 300}],
    "download_file": [{"session_id": SID, "path": "out/result.json"}],
    "list_profiles": [{}],
}
# And what must not validate (a model's typical slips).
BAD_CALLS = {
    "execute_python": [{}, {"code": 5}, {"code": "1", "timeout_seconds": -1}, {"code": "1", "cmd": "ls"},
                       {"code": "1", "profile": "no-such-profile"}],
    "create_session": [{"profile": 3}],
    "close_session": [{}],
    "upload_file": [{"session_id": SID, "path": "a"}, {"session_id": SID, "path": "a", "content": "x", "encoding": "hex"}],
    "run_command": [{"session_id": SID}, {"command": "ls"}, {"session_id": SID, "command": "ls", "cmd": "ls"},
                    {"session_id": SID, "command": "ls", "timeout_seconds": -1}],
    "download_file": [{"path": "a"}],
    "list_profiles": [{"x": 1}],
}


def setUpModule():
    global server
    server = AirlockServer().start()


def tearDownModule():
    server.stop()


def fetch_tools(fmt):
    status, headers, data = server.get(f"/v1/tools?format={fmt}")
    assert status == 200, (fmt, status, data)
    assert headers["content-type"].startswith("application/json")
    return json.loads(data)["tools"]


def schema_of(fmt, tool):
    """(name, input schema, strict flag or None) of one emitted definition."""
    if fmt == "openai":
        assert tool["type"] == "function"
        fn = tool["function"]
        return fn["name"], fn["parameters"], fn["strict"]
    if fmt == "openai-responses":
        assert tool["type"] == "function"
        return tool["name"], tool["parameters"], tool["strict"]
    if fmt == "anthropic":
        assert set(tool) == {"name", "description", "input_schema"}, tool.keys()
        return tool["name"], tool["input_schema"], None
    return tool["name"], tool["inputSchema"], None


def strict_ok(schema):
    """OpenAI strict mode: every object has additionalProperties false and all its properties required."""
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("properties", {})) != set(schema.get("required", [])):
            return False
    return all(strict_ok(p) for p in schema.get("properties", {}).values() if isinstance(p, dict))


@unittest.skipIf(jsonschema is None, "python3-jsonschema is not installed (scripts/setup.sh)")
class ToolSchemas(unittest.TestCase):
    def test_every_schema_is_valid_json_schema_and_realistic_calls_validate(self):
        for fmt in FORMATS:
            tools = fetch_tools(fmt)
            names = []
            for tool in tools:
                name, schema, strict = schema_of(fmt, tool)
                names.append(name)
                with self.subTest(fmt=fmt, tool=name):
                    jsonschema.Draft202012Validator.check_schema(schema)
                    validator = jsonschema.Draft202012Validator(schema)
                    for args in CALLS[name]:
                        errors = [e.message for e in validator.iter_errors(args)]
                        self.assertEqual(errors, [], args)
                    for args in BAD_CALLS[name]:
                        self.assertFalse(validator.is_valid(args), f"{name} accepted {args}")
                    if fmt == "mcp":
                        jsonschema.Draft202012Validator.check_schema(tool.get("outputSchema", {}))
                        self.assertIs(tool["annotations"]["openWorldHint"], False)
                    if strict is not None:
                        # strict only where OpenAI's strict mode rules hold.
                        self.assertEqual(strict, strict_ok(schema), name)
            self.assertEqual(names, list(CALLS), fmt)

    def test_openai_strict_is_not_claimed_for_optional_arguments(self):
        fn = {t["function"]["name"]: t["function"] for t in fetch_tools("openai")}
        self.assertIs(fn["execute_python"]["strict"], False)
        self.assertIs(fn["close_session"]["strict"], True)
        self.assertIs(fn["list_profiles"]["strict"], True)
        self.assertEqual(fn["list_profiles"]["parameters"]["required"], [])

    def test_a_model_tool_call_becomes_an_airlock_request(self):
        # The loop of docs/agents.md: the model's arguments (a JSON string) -> POST /v1/execute.
        arguments = json.dumps({"code": "import math\nprint(round(math.pi, 4))\nmath.e > 2", "timeout_seconds": 10})
        args = json.loads(arguments)
        tool = next(t for t in fetch_tools("anthropic") if t["name"] == "execute_python")
        jsonschema.validate(args, tool["input_schema"], cls=jsonschema.Draft202012Validator)
        body = {"code": args["code"]}
        if "timeout_seconds" in args:
            body["timeout"] = args["timeout_seconds"]
        if "profile" in args:
            body["profile"] = args["profile"]
        status, _, data = server.post_json("/v1/execute", body)
        self.assertEqual(status, 200, data)
        result = json.loads(data)
        self.assertEqual(result["stdout"], "3.1416\n")
        self.assertEqual(result["result"], "True")

    def test_unknown_format_is_a_clear_400(self):
        status, _, data = server.get("/v1/tools?format=gemini")
        self.assertEqual(status, 400)
        self.assertIn("openai", json.loads(data)["error"])


if __name__ == "__main__":
    unittest.main()
