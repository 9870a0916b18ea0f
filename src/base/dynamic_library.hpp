// Binding the functions of a library loaded at run time (dlopen), for the optional dependencies
// libgnio does not link (libxdp, libpmix): each pointer takes its symbol's type from the
// declaration it is declared with, and the first missing symbol names what is wrong.
#pragma once

#include <dlfcn.h>

#include <string>
#include <type_traits>

namespace gnio {

/// Points `fn` at `name` in the library `handle` (from dlopen). When the symbol is missing, `fn`
/// stays null and, unless an earlier miss is recorded there, *error says "<library> has no
/// <name>".
template <class Fn>
void bind_symbol(void* handle, Fn& fn, const char* name, const char* library, std::string* error) {
  fn = reinterpret_cast<std::remove_reference_t<Fn>>(dlsym(handle, name));
  if (fn == nullptr && error->empty()) *error = std::string(library) + " has no " + name;
}

}  // namespace gnio
