// Boost.Asio and Beast as the HTTP service's files use them (src/api only:
// HTTP stays in this folder).
#pragma once

// Boost 1.74's asio headers need <utility> first under g++ 12 -std=c++20
// (research/ecosystem.md §6.3).
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <string>

namespace airlock::api {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

inline std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

inline std::string ToString(beast::string_view s) { return std::string(s.data(), s.size()); }

}  // namespace airlock::api
