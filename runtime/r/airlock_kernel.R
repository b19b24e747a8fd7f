# airlock's R kernel: one persistent R process in a session's sandbox that runs cells sent by
# the server and reports what they produced, in the runner's session protocol
# (runtime/python/airlock_runner.py, "Sessions"; model/runner_protocol.h).
#
# Started by the sandbox's init as
#
#   /usr/bin/Rscript --vanilla /proc/self/fd/5 <cwd>
#
# (this file arrives on fd 5, a sealed memfd), with fd 3 the control pipe (calls: "C",
# an 8-byte little-endian length, a JSON frame {"frame":"call","code":str,"call":int,
# "env":{str:str}}) and fd 4 the event channel (JSON lines, ASCII). Per call: the cell's output
# on stdout and stderr, then {"type":"result","is_main_result":true,"data":{"text/plain":...}}
# with the last top-level expression's value as R prints it when it is visible (earlier visible
# values are printed on stdout, as Rscript prints them), {"type":"error",...} when an
# expression failed (the cell stops there, as a script does), and always last
# {"type":"end","exit_code":0|1,"call":n}. End of file on fd 3 ends the kernel.
#
# State is the global environment, kept between cells. The call's "env" is set with
# Sys.setenv for that call only, then put back (or unset). SIGINT from the server interrupts
# the cell (R's "interrupt" condition). Warnings are printed on stderr after the expression
# that raised them.
#
# Not a security boundary: the sandbox is. The server treats fd 4 as untrusted.
local({
  args <- commandArgs(trailingOnly = TRUE)
  cwd <- if (length(args) >= 1) args[[length(args)]] else "/home/user"
  control <- file("/proc/self/fd/3", open = "rb", raw = TRUE)
  events <- file("/proc/self/fd/4", open = "wb", raw = TRUE)
  text_cap <- 1048576L

  # ---- a small JSON reader for the server's frames (objects, strings, numbers, literals) ----
  parse_json <- function(text) {
    chars <- strsplit(text, "", fixed = TRUE)[[1]]
    n <- length(chars)
    pos <- 1L
    skip <- function() {
      while (pos <= n && chars[[pos]] %in% c(" ", "\t", "\n", "\r")) pos <<- pos + 1L
    }
    value <- function() {
      skip()
      if (pos > n) stop("unexpected end of JSON")
      c <- chars[[pos]]
      if (c == "{") return(object())
      if (c == "[") return(array())
      if (c == "\"") return(string())
      if (c == "t") { pos <<- pos + 4L; return(TRUE) }
      if (c == "f") { pos <<- pos + 5L; return(FALSE) }
      if (c == "n") { pos <<- pos + 4L; return(NULL) }
      start <- pos
      while (pos <= n && chars[[pos]] %in% c("-", "+", ".", "e", "E", as.character(0:9))) pos <<- pos + 1L
      as.numeric(paste(chars[start:(pos - 1L)], collapse = ""))
    }
    object <- function() {
      out <- list()
      pos <<- pos + 1L
      skip()
      if (chars[[pos]] == "}") { pos <<- pos + 1L; return(out) }
      repeat {
        skip()
        key <- string()
        skip()
        pos <<- pos + 1L  # ':'
        v <- value()
        out[key] <- list(v)
        skip()
        c <- chars[[pos]]
        pos <<- pos + 1L
        if (c == "}") return(out)
      }
    }
    array <- function() {
      out <- list()
      pos <<- pos + 1L
      skip()
      if (chars[[pos]] == "]") { pos <<- pos + 1L; return(out) }
      repeat {
        out[[length(out) + 1L]] <- value()
        skip()
        c <- chars[[pos]]
        pos <<- pos + 1L
        if (c == "]") return(out)
      }
    }
    string <- function() {
      pos <<- pos + 1L
      parts <- character()
      start <- pos
      repeat {
        c <- chars[[pos]]
        if (c == "\"") break
        if (c == "\\") {
          if (pos > start) parts <- c(parts, paste(chars[start:(pos - 1L)], collapse = ""))
          e <- chars[[pos + 1L]]
          if (e == "u") {
            code <- strtoi(paste(chars[(pos + 2L):(pos + 5L)], collapse = ""), 16L)
            pos <<- pos + 6L
            if (code >= 0xD800 && code <= 0xDBFF && pos + 5L <= n && chars[[pos]] == "\\" && chars[[pos + 1L]] == "u") {
              low <- strtoi(paste(chars[(pos + 2L):(pos + 5L)], collapse = ""), 16L)
              if (low >= 0xDC00 && low <= 0xDFFF) {
                code <- 0x10000 + (code - 0xD800) * 1024 + (low - 0xDC00)
                pos <<- pos + 6L
              }
            }
            if (code >= 0xD800 && code <= 0xDFFF) code <- 0xFFFD
            parts <- c(parts, if (code == 0) "" else intToUtf8(code))
          } else {
            parts <- c(parts, switch(e, "n" = "\n", "t" = "\t", "r" = "\r", "b" = "\b", "f" = "\f", e))
            pos <<- pos + 2L
          }
          start <- pos
        } else {
          pos <<- pos + 1L
        }
      }
      if (pos > start) parts <- c(parts, paste(chars[start:(pos - 1L)], collapse = ""))
      pos <<- pos + 1L
      paste(parts, collapse = "")
    }
    value()
  }

  # ---- JSON out: ASCII, every other character escaped ----
  json_string <- function(s) {
    s <- enc2utf8(as.character(s))
    if (nchar(s, type = "chars", allowNA = TRUE) > text_cap) s <- paste0(substr(s, 1L, text_cap), "... [truncated by airlock]")
    codes <- utf8ToInt(s)
    if (any(is.na(codes))) codes <- utf8ToInt(iconv(s, "UTF-8", "UTF-8", sub = "?"))
    out <- character(length(codes))
    plain <- codes >= 0x20 & codes < 0x7F & codes != 0x22 & codes != 0x5C
    out[plain] <- intToUtf8(codes[plain], multiple = TRUE)
    esc <- which(!plain)
    for (i in esc) {
      cp <- codes[[i]]
      out[[i]] <- if (cp == 0x22) "\\\"" else if (cp == 0x5C) "\\\\" else if (cp == 0x0A) "\\n" else
        if (cp == 0x09) "\\t" else if (cp < 0x10000) sprintf("\\u%04x", cp) else {
          v <- cp - 0x10000
          sprintf("\\u%04x\\u%04x", 0xD800 + v %/% 1024, 0xDC00 + v %% 1024)
        }
    }
    paste0("\"", paste(out, collapse = ""), "\"")
  }
  emit <- function(lines) {
    writeBin(charToRaw(paste0(paste(lines, collapse = "\n"), "\n")), events)
    flush(events)
  }
  result_event <- function(text) {
    paste0("{\"type\":\"result\",\"is_main_result\":true,\"data\":{\"text/plain\":", json_string(text), "}}")
  }
  error_event <- function(name, value, traceback) {
    paste0("{\"type\":\"error\",\"name\":", json_string(name), ",\"value\":", json_string(value),
           ",\"traceback\":", json_string(traceback), "}")
  }
  end_event <- function(code, call) {
    paste0("{\"type\":\"end\",\"exit_code\":", code, if (!is.null(call)) paste0(",\"call\":", format(call, scientific = FALSE)), "}")
  }

  read_call <- function() {
    head <- readBin(control, "raw", 9L)
    if (length(head) < 9L || head[[1]] != as.raw(0x43)) return(NULL)
    size <- sum(as.numeric(head[2:9]) * 256^(0:7))
    if (size > 256 * 1024 * 1024) return(NULL)
    body <- raw(0)
    while (length(body) < size) {
      more <- readBin(control, "raw", size - length(body))
      if (length(more) == 0L) return(NULL)
      body <- c(body, more)
    }
    rawToChar(body)
  }

  valid_name <- function(k) grepl("^[A-Za-z_][A-Za-z0-9_]*$", k)

  run_cell <- function(code) {
    exprs <- tryCatch(parse(text = code, keep.source = FALSE), error = function(e) e)
    if (inherits(exprs, "error")) {
      msg <- conditionMessage(exprs)
      return(list(exit = 1L, events = error_event("SyntaxError", msg, paste0("Error: ", msg))))
    }
    out <- character()
    exit <- 0L
    for (i in seq_along(exprs)) {
      last <- i == length(exprs)
      r <- tryCatch(
        withCallingHandlers(
          withVisible(eval(exprs[[i]], envir = globalenv())),
          warning = function(w) {
            cat("Warning message:\n", conditionMessage(w), "\n", sep = "", file = stderr())
            invokeRestart("muffleWarning")
          }
        ),
        interrupt = function(c) structure(list(), class = "airlock_interrupt"),
        error = function(e) e
      )
      if (inherits(r, "airlock_interrupt")) {
        out <- c(out, error_event("KeyboardInterrupt", "the cell was interrupted (SIGINT)", ""))
        exit <- 1L
        break
      }
      if (inherits(r, "error")) {
        call <- conditionCall(r)
        msg <- conditionMessage(r)
        # A call of the cell's own top level is the kernel's eval: R shows "Error: " then.
        top <- is.null(call) || (is.call(call) && identical(call[[1]], as.name("eval")))
        head <- if (top) "Error: " else paste0("Error in ", paste(deparse(call, nlines = 1L), collapse = ""), " : ")
        out <- c(out, error_event("Error", msg, paste0(head, msg)))
        exit <- 1L
        break
      }
      if (isTRUE(r$visible)) {
        if (last) {
          text <- tryCatch(paste(utils::capture.output(print(r$value)), collapse = "\n"),
                           error = function(e) paste0("<unprintable: ", conditionMessage(e), ">"))
          out <- c(out, result_event(text))
        } else {
          print(r$value)
        }
      }
    }
    list(exit = exit, events = out)
  }

  serve_call <- function(payload) {
    call <- NULL
    saved <- list()
    res <- tryCatch({
      frame <- parse_json(payload)
      call <- frame[["call"]]
      code <- frame[["code"]]
      if (!is.character(code)) stop("a call frame needs code (a string)")
      for (k in names(frame[["env"]])) {
        v <- frame[["env"]][[k]]
        if (!valid_name(k) || !is.character(v)) next
        saved[k] <- list(Sys.getenv(k, unset = NA))
        do.call(Sys.setenv, stats::setNames(list(v), k))
      }
      run_cell(code)
    }, error = function(e) {
      list(exit = 2L, events = error_event("AirlockRunnerError", conditionMessage(e), conditionMessage(e)))
    }, interrupt = function(c) {
      list(exit = 1L, events = error_event("KeyboardInterrupt", "the cell was interrupted (SIGINT)", ""))
    })
    for (k in names(saved)) {
      if (is.na(saved[[k]])) Sys.unsetenv(k) else do.call(Sys.setenv, stats::setNames(list(saved[[k]]), k))
    }
    flush(stdout())
    flush(stderr())
    emit(c(res$events, end_event(res$exit, call)))
  }

  ok <- tryCatch({ setwd(cwd); TRUE }, error = function(e) {
    cat("airlock: the context's working directory ", cwd, ": ", conditionMessage(e), "\n", sep = "", file = stderr())
    FALSE
  })
  if (!ok) quit(save = "no", status = 2L)
  repeat {
    payload <- tryCatch(read_call(), interrupt = function(c) "")
    if (is.null(payload)) break
    if (identical(payload, "")) next
    serve_call(payload)
  }
  quit(save = "no", status = 0L)
})
