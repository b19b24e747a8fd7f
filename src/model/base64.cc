#include "model/base64.h"

#include <cstdint>

namespace airlock::model {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) | uint8_t(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (size_t rest = in.size() - i; rest > 0) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (rest == 2) v |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

size_t Base64DecodedSize(std::string_view text) {
  size_t n = 0, pad = 0;
  for (char c : text) {
    if (c == '\r' || c == '\n') continue;
    ++n;
    if (c == '=') ++pad;
  }
  return n / 4 * 3 - pad;
}

bool Base64Decode(std::string_view text, std::string* out) {
  out->clear();
  out->reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int have = 0;   // sextets in acc
  int pad = 0;    // '=' seen
  for (char c : text) {
    if (c == '\r' || c == '\n') continue;
    if (c == '=') {
      ++pad;
      if (pad > 2 || have < 2) return false;
      continue;
    }
    if (pad > 0) return false;  // data after padding
    int v = Value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    if (++have == 4) {
      out->push_back(static_cast<char>((acc >> 16) & 0xFF));
      out->push_back(static_cast<char>((acc >> 8) & 0xFF));
      out->push_back(static_cast<char>(acc & 0xFF));
      acc = 0;
      have = 0;
    }
  }
  if (pad == 0) return have == 0;
  // "xx==" or "xxx=": the quad is completed by the padding.
  if (have + pad != 4) return false;
  if (have == 2) {
    if (acc & 0xF) return false;  // non-canonical trailing bits
    out->push_back(static_cast<char>((acc >> 4) & 0xFF));
  } else {
    if (acc & 0x3) return false;
    out->push_back(static_cast<char>((acc >> 10) & 0xFF));
    out->push_back(static_cast<char>((acc >> 2) & 0xFF));
  }
  return true;
}

}  // namespace airlock::model
