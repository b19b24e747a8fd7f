// airlock's Java kernel: one persistent JShell (the JDK's jdk.jshell API, its snippets run in
// this JVM: the "local" execution engine, so nothing listens on a socket) in a session's
// sandbox, which runs cells sent by the server and reports what they produced, in the runner's
// session protocol (runtime/python/airlock_runner.py, "Sessions"; model/runner_protocol.h).
//
// Started by the sandbox's init as
//
//   /usr/bin/java [memory flags] --source 11 /proc/self/fd/5 <cwd>
//
// (this file arrives on fd 5, a sealed memfd; the JDK compiles it in memory), with
// fd 3 the control pipe (calls: "C", an 8-byte little-endian length, a JSON frame
// {"frame":"call","code":str,"call":int,"env":{str:str}}) and fd 4 the event channel (JSON
// lines, ASCII). Per call: the cell's output on stdout and stderr, then
// {"type":"result","is_main_result":true,"data":{"text/plain":...}} with the value of the
// cell's last snippet when it is an expression (a String as it is, anything else as JShell
// shows it), {"type":"error",...} for a snippet that does not compile or throws (the cell stops
// there), and always last {"type":"end","exit_code":0|1,"call":n}. End of file on fd 3 ends the
// kernel.
//
// State (variables, methods, classes, imports) is the JShell's, kept between cells. A JVM
// cannot change its own environment: the call's "env" becomes system properties for that call
// only (System.getProperty, as E2B's Java kernel does), put back afterwards; a context's own
// env is the process environment (System.getenv). "user.dir" is the context's working
// directory. SIGINT from the server stops the running snippet (JShell.stop()).
//
// Not a security boundary: the sandbox is. The server treats fd 4 as untrusted.
import java.io.DataInputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.JShell;
import jdk.jshell.JShellException;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;
import jdk.jshell.UnresolvedReferenceException;
import jdk.jshell.VarSnippet;

public class AirlockKernel {
  static final int TEXT_CAP = 1 << 20;
  static volatile boolean interrupted = false;
  static JShell shell;

  public static void main(String[] args) throws Exception {
    String cwd = args.length > 0 ? args[args.length - 1] : "/home/user";
    System.setProperty("user.dir", cwd);
    DataInputStream control = new DataInputStream(new FileInputStream("/proc/self/fd/3"));
    OutputStream events = new FileOutputStream("/proc/self/fd/4");
    shell = JShell.builder().executionEngine("local").build();
    // Warms the compiler up before the first cell (its first snippet costs ~1 s).
    shell.eval("int $airlock_warm = 0;");
    // SIGINT stops the running snippet. sun.misc.Signal (jdk.unsupported) is reached by
    // reflection, so that compiling this file warns of nothing.
    try {
      Class<?> signal = Class.forName("sun.misc.Signal");
      Class<?> handler = Class.forName("sun.misc.SignalHandler");
      Object onInt = java.lang.reflect.Proxy.newProxyInstance(handler.getClassLoader(), new Class<?>[] {handler},
          (proxy, method, margs) -> {
            if (method.getName().equals("handle")) {
              interrupted = true;
              shell.stop();
            }
            return null;
          });
      signal.getMethod("handle", signal, handler).invoke(null, signal.getConstructor(String.class).newInstance("INT"), onInt);
    } catch (Throwable t) {
      System.err.println("airlock: SIGINT cannot be handled here (" + t + "): a cell runs until it ends");
    }
    while (true) {
      byte[] head = new byte[9];
      try {
        control.readFully(head);
      } catch (IOException e) {
        break;  // end of file: the server closed the context
      }
      if (head[0] != 'C') break;
      long size = 0;
      for (int i = 8; i >= 1; i--) size = (size << 8) | (head[i] & 0xFF);
      if (size > (256L << 20)) break;
      byte[] body = new byte[(int) size];
      try {
        control.readFully(body);
      } catch (IOException e) {
        break;
      }
      List<String> out = new ArrayList<>();
      Object call = null;
      int exit = 0;
      Map<String, String> saved = new LinkedHashMap<>();
      try {
        Object parsed = new Json(new String(body, StandardCharsets.UTF_8)).value();
        if (!(parsed instanceof Map)) throw new IllegalArgumentException("a call frame is a JSON object");
        Map<?, ?> frame = (Map<?, ?>) parsed;
        call = frame.get("call");
        Object code = frame.get("code");
        if (!(code instanceof String)) throw new IllegalArgumentException("a call frame needs code (a string)");
        Object env = frame.get("env");
        if (env instanceof Map) {
          for (Map.Entry<?, ?> e : ((Map<?, ?>) env).entrySet()) {
            if (!(e.getKey() instanceof String) || !(e.getValue() instanceof String)) continue;
            String k = (String) e.getKey();
            saved.put(k, System.getProperty(k));
            System.setProperty(k, (String) e.getValue());
          }
        }
        interrupted = false;
        exit = runCell((String) code, out);
      } catch (Throwable t) {
        exit = 2;
        out.add(errorEvent("AirlockRunnerError", String.valueOf(t), String.valueOf(t)));
      } finally {
        for (Map.Entry<String, String> e : saved.entrySet()) {
          if (e.getValue() == null) System.clearProperty(e.getKey());
          else System.setProperty(e.getKey(), e.getValue());
        }
      }
      System.out.flush();
      System.err.flush();
      StringBuilder end = new StringBuilder("{\"type\":\"end\",\"exit_code\":" + exit);
      if (call instanceof Double) end.append(",\"call\":").append(((Double) call).longValue());
      end.append('}');
      out.add(end.toString());
      StringBuilder all = new StringBuilder();
      for (String line : out) all.append(line).append('\n');
      events.write(all.toString().getBytes(StandardCharsets.US_ASCII));
      events.flush();
    }
    System.exit(0);
  }

  // Runs the cell's snippets in order; the last expression's value is the result.
  static int runCell(String code, List<String> out) {
    SourceCodeAnalysis sca = shell.sourceCodeAnalysis();
    String remaining = code;
    String lastValue = null;
    while (!remaining.isBlank()) {
      SourceCodeAnalysis.CompletionInfo info = sca.analyzeCompletion(remaining);
      String source;
      switch (info.completeness()) {
        case COMPLETE:
        case COMPLETE_WITH_SEMI:
          source = info.source();
          remaining = info.remaining();
          break;
        case EMPTY:
          remaining = "";
          continue;
        default:
          // Incomplete or unparsable: JShell's own diagnostics say why.
          source = remaining;
          remaining = "";
      }
      lastValue = null;
      List<SnippetEvent> events = shell.eval(source);
      for (SnippetEvent e : events) {
        if (interrupted) {
          out.add(errorEvent("KeyboardInterrupt", "the cell was interrupted (SIGINT)", ""));
          return 1;
        }
        if (e.causeSnippet() != null) continue;  // a dependent snippet's update
        Snippet s = e.snippet();
        if (e.status() == Snippet.Status.REJECTED) {
          List<Diag> diags = shell.diagnostics(s).collect(Collectors.toList());
          StringBuilder msg = new StringBuilder();
          for (Diag d : diags) {
            if (!d.isError()) continue;
            if (msg.length() > 0) msg.append('\n');
            msg.append(d.getMessage(null));
          }
          String text = msg.length() > 0 ? msg.toString() : "the snippet does not compile";
          out.add(errorEvent("CompilationError", text, text + "\n" + s.source()));
          return 1;
        }
        JShellException ex = e.exception();
        if (ex != null) {
          String name = ex instanceof EvalException ? ((EvalException) ex).getExceptionClassName()
                        : ex instanceof UnresolvedReferenceException ? "UnresolvedReferenceException"
                        : ex.getClass().getName();
          String message = ex.getMessage() == null ? "" : ex.getMessage();
          StringBuilder trace = new StringBuilder(name + (message.isEmpty() ? "" : ": " + message));
          for (StackTraceElement el : ex.getStackTrace()) {
            trace.append("\n\tat ").append(el);
          }
          out.add(errorEvent(name, message, trace.toString()));
          return 1;
        }
        boolean expression = s.kind() == Snippet.Kind.EXPRESSION ||
            (s.kind() == Snippet.Kind.VAR && s.subKind() == Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND);
        if (expression && e.value() != null) {
          String type = s instanceof VarSnippet ? ((VarSnippet) s).typeName()
                        : s instanceof jdk.jshell.ExpressionSnippet ? ((jdk.jshell.ExpressionSnippet) s).typeName() : "";
          lastValue = "String".equals(type) || "java.lang.String".equals(type) ? unquote(e.value()) : e.value();
        }
      }
    }
    if (interrupted) {
      out.add(errorEvent("KeyboardInterrupt", "the cell was interrupted (SIGINT)", ""));
      return 1;
    }
    if (lastValue != null) {
      out.add("{\"type\":\"result\",\"is_main_result\":true,\"data\":{\"text/plain\":" + quote(lastValue) + "}}");
    }
    return 0;
  }

  // JShell shows a String as a Java literal: its text, unescaped (null stays null).
  static String unquote(String v) {
    if (v.length() < 2 || v.charAt(0) != '"' || v.charAt(v.length() - 1) != '"') return v;
    StringBuilder b = new StringBuilder();
    for (int i = 1; i < v.length() - 1; i++) {
      char c = v.charAt(i);
      if (c != '\\' || i + 1 >= v.length() - 1) {
        b.append(c);
        continue;
      }
      char n = v.charAt(++i);
      switch (n) {
        case 'n': b.append('\n'); break;
        case 't': b.append('\t'); break;
        case 'r': b.append('\r'); break;
        case 'b': b.append('\b'); break;
        case 'f': b.append('\f'); break;
        case 'u':
          if (i + 4 < v.length()) {
            b.append((char) Integer.parseInt(v.substring(i + 1, i + 5), 16));
            i += 4;
          }
          break;
        default: b.append(n);
      }
    }
    return b.toString();
  }

  static String errorEvent(String name, String value, String traceback) {
    return "{\"type\":\"error\",\"name\":" + quote(name) + ",\"value\":" + quote(value) + ",\"traceback\":" +
        quote(traceback) + "}";
  }

  // A JSON string, ASCII only.
  static String quote(String s) {
    if (s.length() > TEXT_CAP) s = s.substring(0, TEXT_CAP) + "... [truncated by airlock]";
    StringBuilder b = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"') b.append("\\\"");
      else if (c == '\\') b.append("\\\\");
      else if (c == '\n') b.append("\\n");
      else if (c == '\t') b.append("\\t");
      else if (c < 0x20 || c >= 0x7F) b.append(String.format("\\u%04x", (int) c));
      else b.append(c);
    }
    return b.append('"').toString();
  }

  // The server's frames: objects, arrays, strings, numbers (as Double), booleans, null.
  static final class Json {
    private final String s;
    private int i = 0;

    Json(String s) { this.s = s; }

    Object value() {
      skip();
      char c = s.charAt(i);
      if (c == '{') {
        Map<String, Object> m = new LinkedHashMap<>();
        i++;
        skip();
        if (s.charAt(i) == '}') { i++; return m; }
        while (true) {
          skip();
          String k = string();
          skip();
          i++;  // ':'
          m.put(k, value());
          skip();
          if (s.charAt(i++) == '}') return m;
        }
      }
      if (c == '[') {
        List<Object> l = new ArrayList<>();
        i++;
        skip();
        if (s.charAt(i) == ']') { i++; return l; }
        while (true) {
          l.add(value());
          skip();
          if (s.charAt(i++) == ']') return l;
        }
      }
      if (c == '"') return string();
      if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
      if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
      if (s.startsWith("null", i)) { i += 4; return null; }
      int start = i;
      while (i < s.length() && "+-.eE0123456789".indexOf(s.charAt(i)) >= 0) i++;
      return Double.parseDouble(s.substring(start, i));
    }

    private void skip() {
      while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
    }

    private String string() {
      StringBuilder b = new StringBuilder();
      i++;
      while (true) {
        char c = s.charAt(i++);
        if (c == '"') return b.toString();
        if (c != '\\') {
          b.append(c);
          continue;
        }
        char e = s.charAt(i++);
        switch (e) {
          case 'n': b.append('\n'); break;
          case 't': b.append('\t'); break;
          case 'r': b.append('\r'); break;
          case 'b': b.append('\b'); break;
          case 'f': b.append('\f'); break;
          case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
          default: b.append(e);
        }
      }
    }
  }
}
