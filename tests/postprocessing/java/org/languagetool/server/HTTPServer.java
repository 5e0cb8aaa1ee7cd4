// A stand-in for LanguageTool's HTTP server (same class name and "-p PORT" argument), so
// tests can let language-tool-python start a "LanguageTool" from an offline install or
// its download cache, as it would start the real one. It knows one rule, EN_A_VS_AN, and
// reports offsets as Java String indices (UTF-16 code units), like LanguageTool does.
package org.languagetool.server;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class HTTPServer {
  private static final Pattern A_BEFORE_VOWEL = Pattern.compile("\\b([Aa]) (?=[aeiouAEIOU])");

  public static void main(String[] args) throws IOException {
    int port = 8081;
    for (int i = 0; i < args.length - 1; i++) {
      if (args[i].equals("-p") || args[i].equals("--port")) port = Integer.parseInt(args[i + 1]);
    }
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
    server.createContext("/v2/healthcheck", ex -> send(ex, 200, "OK"));
    server.createContext("/v2/languages", ex -> send(ex, 200,
        "[{\"name\":\"English (US)\",\"code\":\"en\",\"longCode\":\"en-US\"}]"));
    server.createContext("/v2/check", HTTPServer::check);
    server.start();
  }

  private static void check(HttpExchange ex) throws IOException {
    String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
    String text = "";
    for (String pair : body.split("&")) {
      int eq = pair.indexOf('=');
      if (eq > 0 && pair.substring(0, eq).equals("text")) {
        text = URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
      }
    }
    StringBuilder json = new StringBuilder("{\"matches\":[");
    Matcher m = A_BEFORE_VOWEL.matcher(text);
    boolean first = true;
    while (m.find()) {
      if (!first) json.append(',');
      first = false;
      String repl = m.group(1).equals("A") ? "An" : "an";
      json.append("{\"message\":\"Use an before a vowel\",\"offset\":").append(m.start(1))
          .append(",\"length\":1,\"replacements\":[{\"value\":\"").append(repl)
          .append("\"}],\"context\":{\"text\":\"\",\"offset\":0,\"length\":1},")
          .append("\"rule\":{\"id\":\"EN_A_VS_AN\",\"issueType\":\"misspelling\",")
          .append("\"category\":{\"id\":\"MISC\"}}}");
    }
    send(ex, 200, json.append("]}").toString());
  }

  private static void send(HttpExchange ex, int status, String body) throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().set("Content-Type", "application/json");
    ex.sendResponseHeaders(status, bytes.length);
    try (OutputStream out = ex.getResponseBody()) {
      out.write(bytes);
    }
  }
}
