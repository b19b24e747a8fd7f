// The warm runs' init program (init/main.cc), built static and linked into
// this library as bytes (init_image.S).
//
//   std::string_view image = InitImage();   // the ELF file
#pragma once

#include <string_view>

extern "C" const char airlock_init_image_begin[];
extern "C" const char airlock_init_image_end[];

namespace airlock::isolation {

inline std::string_view InitImage() {
  return std::string_view(airlock_init_image_begin,
                          static_cast<size_t>(airlock_init_image_end - airlock_init_image_begin));
}

}  // namespace airlock::isolation
