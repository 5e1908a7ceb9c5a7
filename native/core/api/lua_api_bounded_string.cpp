// SPDX-License-Identifier: MIT
// Bounded string functions: rep, lower, upper, reverse, format, pack, packsize, unpack, metered.
//
// Each keeps the Lua 5.4.4 behaviour (reference manual §6.4) and counts its
// work with a WorkMeter (see lua_api_bounded.cpp). What made the stock ones
// long: string.rep copies n times even when each copy is empty
// (rep("", 2^40) ran for hours), and lower/upper/reverse, format and pack
// produce output in proportion to their arguments, up to what memory allows
// (pack("c2000000000", "") writes 2 GB of padding a byte at a time).
#include <algorithm>
#include <cctype>
#include <climits>
#include <clocale>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "core/api/lua_api_bounded.hpp"
#include "core/limits/work_meter.hpp"

namespace lua_tasks {

namespace {

// Lua's limit for a string these functions build (it fits an int).
constexpr size_t kMaxSize = static_cast<size_t>(INT_MAX);
// Bytes handled between two looks at the meter.
constexpr size_t kChunk = size_t{1} << 16;

// ---------------------------------------------------------------- rep

// string.rep(s, n [, sep])
int l_str_rep(lua_State* L) {
  size_t len, seplen;
  const char* s = luaL_checklstring(L, 1, &len);
  const lua_Integer n = luaL_checkinteger(L, 2);
  const char* sep = luaL_optlstring(L, 3, "", &seplen);
  if (n <= 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  if (len + seplen < len || len + seplen > kMaxSize / static_cast<size_t>(n)) {
    return luaL_error(L, "resulting string too large");
  }
  const size_t unit = len + seplen;
  const size_t total = static_cast<size_t>(n) * len + static_cast<size_t>(n - 1) * seplen;
  if (total == 0) {  // n empty copies: nothing to write, however many
    lua_pushliteral(L, "");
    return 1;
  }
  WorkMeter meter(L);
  luaL_Buffer b;
  char* p = luaL_buffinitsize(L, &b, total);
  // One copy of s .. sep, then what is written copied on after it: a whole
  // number of copies back, so the pattern repeats (the last separator falls
  // past the end). A few memcpy calls instead of n, a meter check each
  // (memcpy runs at about 4 bytes a ns).
  std::memcpy(p, s, std::min(len, total));
  if (unit <= total && seplen > 0) std::memcpy(p + len, sep, seplen);
  size_t done = std::min(unit, total);
  while (done < total) {
    const size_t back = done / unit * unit;  // at least one copy, at most `done`
    const size_t n_copy = std::min({back, total - done, WorkMeter::kCheckEvery * 4});
    std::memcpy(p + done, p + done - back, n_copy);
    done += n_copy;
    if (meter.Add(n_copy / 4)) return LuaHost::RaiseStop(L);
  }
  luaL_pushresultsize(&b, total);
  meter.Done(L);
  return 1;
}

// ---------------------------------------------------------------- lower, upper, reverse

// Writes len bytes into a new string, `map(i)` each, metered.
template <typename F>
int MapString(lua_State* L, F map) {
  size_t len;
  const char* s = luaL_checklstring(L, 1, &len);
  WorkMeter meter(L);
  luaL_Buffer b;
  char* p = luaL_buffinitsize(L, &b, len);
  for (size_t at = 0; at < len;) {
    const size_t end = std::min(len, at + kChunk);
    for (size_t i = at; i < end; ++i) p[i] = map(s, len, i);
    if (meter.Add((end - at) * 2)) return LuaHost::RaiseStop(L);
    at = end;
  }
  luaL_pushresultsize(&b, len);
  meter.Done(L);
  return 1;
}

int l_str_lower(lua_State* L) {
  return MapString(L, [](const char* s, size_t, size_t i) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  });
}
int l_str_upper(lua_State* L) {
  return MapString(L, [](const char* s, size_t, size_t i) {
    return static_cast<char>(std::toupper(static_cast<unsigned char>(s[i])));
  });
}
int l_str_reverse(lua_State* L) {
  return MapString(L, [](const char* s, size_t len, size_t i) { return s[len - 1 - i]; });
}

// ---------------------------------------------------------------- format

// One item's longest output: a float with '%a' or an exponent (99
// significant digits, sign, "0x", point, exponent), and '%.99f' of the
// largest double (99 decimals, 309 integer digits, sign, point).
constexpr int kMaxItem = 120;
constexpr int kMaxItemF = 110 + 308;
// A conversion specification: '%', flags, width (2), '.', precision (2),
// length modifier, conversion, '\0', and room to spare.
constexpr size_t kMaxFormat = 32;

constexpr const char kFlagsFloat[] = "-+#0 ";  // a A e E f F g G
constexpr const char kFlagsHex[] = "-#0";      // o x X
constexpr const char kFlagsInt[] = "-+0 ";     // d i
constexpr const char kFlagsUnsigned[] = "-0";  // u
constexpr const char kFlagsPlain[] = "-";      // c p s

const char* TwoDigits(const char* s) {
  if (std::isdigit(static_cast<unsigned char>(*s))) {
    ++s;
    if (std::isdigit(static_cast<unsigned char>(*s))) ++s;
  }
  return s;
}

// Raises unless `form` ('%', then the conversion last) uses only `flags`, a
// width of two digits at most not starting with 0, and (if allowed) a
// precision of two digits at most.
void CheckSpec(lua_State* L, const char* form, const char* flags, bool precision) {
  const char* spec = form + 1;
  spec += std::strspn(spec, flags);
  if (*spec != '0') {
    spec = TwoDigits(spec);
    if (*spec == '.' && precision) spec = TwoDigits(spec + 1);
  }
  if (!std::isalpha(static_cast<unsigned char>(*spec))) {
    luaL_error(L, "invalid conversion specification: '%s'", form);
  }
}

// Inserts a length modifier before the conversion of `form`.
void AddLengthModifier(char* form, const char* mod) {
  const size_t l = std::strlen(form);
  const size_t m = std::strlen(mod);
  const char conv = form[l - 1];
  std::memcpy(form + l - 1, mod, m);
  form[l - 1 + m] = conv;
  form[l + m] = '\0';
}

// %q of a string: quoted so that Lua reads it back, metered.
bool AddQuoted(luaL_Buffer* b, WorkMeter* meter, const char* s, size_t len) {
  luaL_addchar(b, '"');
  for (size_t i = 0; i < len; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\' || c == '\n') {
      luaL_addchar(b, '\\');
      luaL_addchar(b, static_cast<char>(c));
    } else if (std::iscntrl(c)) {
      char esc[10];
      // s[len] is the string's terminating zero: no digit after the last.
      const bool digit_next = std::isdigit(static_cast<unsigned char>(s[i + 1]));
      std::snprintf(esc, sizeof esc, digit_next ? "\\%03d" : "\\%d", static_cast<int>(c));
      luaL_addstring(b, esc);
    } else {
      luaL_addchar(b, static_cast<char>(c));
    }
    if ((i & (kChunk - 1)) == kChunk - 1 && meter->Add(kChunk * 4)) return false;
  }
  luaL_addchar(b, '"');
  return true;
}

// %q of a number: a float in hex (exact), or the fixed spellings of the
// infinities and NaN; an integer in decimal (the smallest one in hex, which
// Lua reads back as an integer).
int QuoteNumber(lua_State* L, char* buff, int arg) {
  if (lua_isinteger(L, arg)) {
    const lua_Integer n = lua_tointeger(L, arg);
    return std::snprintf(buff, kMaxItem, n == LUA_MININTEGER ? "0x%llx" : "%lld", static_cast<long long>(n));
  }
  const lua_Number x = lua_tonumber(L, arg);
  if (x == HUGE_VAL) return std::snprintf(buff, kMaxItem, "1e9999");
  if (x == -HUGE_VAL) return std::snprintf(buff, kMaxItem, "-1e9999");
  if (x != x) return std::snprintf(buff, kMaxItem, "(0/0)");
  const int nb = std::snprintf(buff, kMaxItem, "%a", x);
  if (std::memchr(buff, '.', static_cast<size_t>(nb)) == nullptr) {  // a locale's radix: Lua reads a dot
    const char point = localeconv()->decimal_point[0];
    if (char* p = static_cast<char*>(std::memchr(buff, point, static_cast<size_t>(nb)))) *p = '.';
  }
  return nb;
}

// string.format(fmt, ...)
int l_str_format(lua_State* L) {
  const int top = lua_gettop(L);
  int arg = 1;
  size_t flen;
  const char* f = luaL_checklstring(L, arg, &flen);
  const char* end = f + flen;
  WorkMeter meter(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  while (f < end) {
    if (*f != '%') {
      const char* pct = static_cast<const char*>(std::memchr(f, '%', static_cast<size_t>(end - f)));
      const size_t n = std::min<size_t>((pct == nullptr ? end : pct) - f, kChunk);
      luaL_addlstring(&b, f, n);
      f += n;
      if (meter.Add(n)) return LuaHost::RaiseStop(L);
      continue;
    }
    ++f;  // may reach the string's terminating zero: an invalid conversion
    if (*f == '%') {
      luaL_addchar(&b, '%');
      ++f;
      if (meter.Add(2)) return LuaHost::RaiseStop(L);
      continue;
    }
    if (meter.Add(WorkMeter::kPerStep / 4)) return LuaHost::RaiseStop(L);
    char form[kMaxFormat];
    int most = kMaxItem;
    char* buff = luaL_prepbuffsize(&b, static_cast<size_t>(most));
    int nb = 0;
    if (++arg > top) return luaL_argerror(L, arg, "no value");
    // The specification: flags, width and precision, then the conversion.
    size_t speclen = std::strspn(f, "-+#0 123456789.") + 1;
    if (speclen >= kMaxFormat - 10) return luaL_error(L, "invalid format (too long)");
    form[0] = '%';
    std::memcpy(form + 1, f, speclen);
    form[speclen + 1] = '\0';
    f += speclen;
    const char conv = form[speclen];
    switch (conv) {
      case 'c':
        CheckSpec(L, form, kFlagsPlain, false);
        nb = std::snprintf(buff, static_cast<size_t>(most), form, static_cast<int>(luaL_checkinteger(L, arg)));
        break;
      case 'd':
      case 'i':
      case 'u':
      case 'o':
      case 'x':
      case 'X': {
        const lua_Integer n = luaL_checkinteger(L, arg);
        CheckSpec(L, form, conv == 'd' || conv == 'i' ? kFlagsInt : conv == 'u' ? kFlagsUnsigned : kFlagsHex, true);
        AddLengthModifier(form, "ll");
        nb = std::snprintf(buff, static_cast<size_t>(most), form, static_cast<long long>(n));
        break;
      }
      case 'a':
      case 'A':
        CheckSpec(L, form, kFlagsFloat, true);
        nb = std::snprintf(buff, static_cast<size_t>(most), form, static_cast<double>(luaL_checknumber(L, arg)));
        break;
      case 'f':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (conv == 'f') {
          most = kMaxItemF;
          buff = luaL_prepbuffsize(&b, static_cast<size_t>(most));
        }
        const lua_Number x = luaL_checknumber(L, arg);
        CheckSpec(L, form, kFlagsFloat, true);
        nb = std::snprintf(buff, static_cast<size_t>(most), form, static_cast<double>(x));
        break;
      }
      case 'p': {
        const void* ptr = lua_topointer(L, arg);
        CheckSpec(L, form, kFlagsPlain, false);
        if (ptr == nullptr) {  // printf's %p of NULL varies: "(null)" as a string
          form[std::strlen(form) - 1] = 's';
          nb = std::snprintf(buff, static_cast<size_t>(most), form, "(null)");
        } else {
          nb = std::snprintf(buff, static_cast<size_t>(most), form, ptr);
        }
        break;
      }
      case 'q': {
        if (form[2] != '\0') return luaL_error(L, "specifier '%%q' cannot have modifiers");
        switch (lua_type(L, arg)) {
          case LUA_TSTRING: {
            size_t len;
            const char* s = lua_tolstring(L, arg, &len);
            if (!AddQuoted(&b, &meter, s, len)) return LuaHost::RaiseStop(L);
            break;
          }
          case LUA_TNUMBER:
            nb = QuoteNumber(L, buff, arg);
            break;
          case LUA_TNIL:
          case LUA_TBOOLEAN:
            luaL_tolstring(L, arg, nullptr);
            luaL_addvalue(&b);
            break;
          default:
            return luaL_argerror(L, arg, "value has no literal form");
        }
        break;
      }
      case 's': {
        size_t len;
        const char* s = luaL_tolstring(L, arg, &len);  // pushed above the buffer
        if (form[2] == '\0') {
          luaL_addvalue(&b);  // the whole string
        } else {
          luaL_argcheck(L, len == std::strlen(s), arg, "string contains zeros");
          CheckSpec(L, form, kFlagsPlain, true);
          if (std::strchr(form, '.') == nullptr && len >= 100) {
            luaL_addvalue(&b);  // no precision, too long to pad: as it is
          } else {
            nb = std::snprintf(buff, static_cast<size_t>(most), form, s);
            lua_pop(L, 1);
          }
        }
        if (meter.Add(len / 4)) return LuaHost::RaiseStop(L);
        break;
      }
      default:
        return luaL_error(L, "invalid conversion '%s' to 'format'", form);
    }
    luaL_addsize(&b, static_cast<size_t>(nb));
  }
  luaL_pushresult(&b);
  meter.Done(L);
  return 1;
}

// ---------------------------------------------------------------- pack, packsize, unpack

constexpr int kMaxIntSize = 16;  // the largest integer size a format may ask for
constexpr int kLuaIntSize = static_cast<int>(sizeof(lua_Integer));
constexpr bool kNativeLittle = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// The native alignment '!' defaults to: that of the strictest of these.
struct AlignProbe {
  char c;
  union {
    lua_Number n;
    double d;
    void* p;
    lua_Integer i;
    long l;
  } u;
};
constexpr int kNativeAlign = static_cast<int>(offsetof(AlignProbe, u));

enum class Opt { kInt, kUint, kFloat, kNumber, kDouble, kChar, kString, kZstr, kPadding, kPadAlign, kNop };

struct PackFormat {
  lua_State* L;
  const char* fmt;  // the next option
  bool little = kNativeLittle;
  int maxalign = 1;
};

// A decimal numeral at the format's position (at most about INT_MAX), or `df`.
int ReadNumber(PackFormat* h, int df) {
  if (!std::isdigit(static_cast<unsigned char>(*h->fmt))) return df;
  int a = 0;
  do {
    a = a * 10 + (*h->fmt++ - '0');
  } while (std::isdigit(static_cast<unsigned char>(*h->fmt)) && a <= (INT_MAX - 9) / 10);
  return a;
}

int ReadIntSize(PackFormat* h, int df) {
  const int size = ReadNumber(h, df);
  if (size > kMaxIntSize || size <= 0) {
    luaL_error(h->L, "integral size (%d) out of limits [1,%d]", size, kMaxIntSize);
  }
  return size;
}

// The next option and its size (0 for options with none).
Opt ReadOption(PackFormat* h, int* size) {
  const char c = *h->fmt++;
  *size = 0;
  switch (c) {
    case 'b':
      *size = 1;
      return Opt::kInt;
    case 'B':
      *size = 1;
      return Opt::kUint;
    case 'h':
      *size = sizeof(short);
      return Opt::kInt;
    case 'H':
      *size = sizeof(short);
      return Opt::kUint;
    case 'l':
      *size = sizeof(long);
      return Opt::kInt;
    case 'L':
      *size = sizeof(long);
      return Opt::kUint;
    case 'j':
      *size = sizeof(lua_Integer);
      return Opt::kInt;
    case 'J':
      *size = sizeof(lua_Integer);
      return Opt::kUint;
    case 'T':
      *size = sizeof(size_t);
      return Opt::kUint;
    case 'f':
      *size = sizeof(float);
      return Opt::kFloat;
    case 'n':
      *size = sizeof(lua_Number);
      return Opt::kNumber;
    case 'd':
      *size = sizeof(double);
      return Opt::kDouble;
    case 'i':
      *size = ReadIntSize(h, sizeof(int));
      return Opt::kInt;
    case 'I':
      *size = ReadIntSize(h, sizeof(int));
      return Opt::kUint;
    case 's':
      *size = ReadIntSize(h, sizeof(size_t));
      return Opt::kString;
    case 'c':
      *size = ReadNumber(h, -1);
      if (*size == -1) luaL_error(h->L, "missing size for format option 'c'");
      return Opt::kChar;
    case 'z':
      return Opt::kZstr;
    case 'x':
      *size = 1;
      return Opt::kPadding;
    case 'X':
      return Opt::kPadAlign;
    case ' ':
      break;
    case '<':
      h->little = true;
      break;
    case '>':
      h->little = false;
      break;
    case '=':
      h->little = kNativeLittle;
      break;
    case '!':
      h->maxalign = ReadIntSize(h, kNativeAlign);
      break;
    default:
      luaL_error(h->L, "invalid format option '%c'", c);
  }
  return Opt::kNop;
}

// The next option, its size, and the padding that aligns it at `offset`.
Opt ReadDetails(PackFormat* h, size_t offset, int* size, int* pad) {
  const Opt opt = ReadOption(h, size);
  int align = *size;
  if (opt == Opt::kPadAlign) {  // aligned as the next option would be
    if (*h->fmt == '\0' || ReadOption(h, &align) == Opt::kChar || align == 0) {
      luaL_argerror(h->L, 1, "invalid next option for option 'X'");
    }
  }
  if (align <= 1 || opt == Opt::kChar) {
    *pad = 0;
  } else {
    if (align > h->maxalign) align = h->maxalign;
    if ((align & (align - 1)) != 0) luaL_argerror(h->L, 1, "format asks for alignment not power of 2");
    *pad = (align - static_cast<int>(offset & static_cast<size_t>(align - 1))) & (align - 1);
  }
  return opt;
}

// Appends n zero bytes, metered (a 'c' option's padding may be 2 GB).
bool AddZeros(luaL_Buffer* b, WorkMeter* meter, size_t n) {
  while (n > 0) {
    const size_t k = std::min(n, kChunk);
    std::memset(luaL_prepbuffsize(b, k), 0, k);
    luaL_addsize(b, k);
    n -= k;
    if (meter->Add(k / 4)) return false;
  }
  return true;
}

// Appends n bytes, metered.
bool AddBytes(luaL_Buffer* b, WorkMeter* meter, const char* s, size_t n) {
  while (n > 0) {
    const size_t k = std::min(n, WorkMeter::kCheckEvery * 4);
    luaL_addlstring(b, s, k);
    s += k;
    n -= k;
    if (meter->Add(k / 4)) return false;
  }
  return true;
}

void PackInt(luaL_Buffer* b, lua_Unsigned n, bool little, int size, bool negative) {
  char* out = luaL_prepbuffsize(b, static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) {
    const unsigned char byte = i < kLuaIntSize ? static_cast<unsigned char>(n >> (8 * i)) : (negative ? 0xFF : 0);
    out[little ? i : size - 1 - i] = static_cast<char>(byte);
  }
  luaL_addsize(b, static_cast<size_t>(size));
}

// Copies `size` bytes, reversing them when the wanted order is not native.
void CopyOrdered(char* dest, const char* src, int size, bool little) {
  if (little == kNativeLittle) {
    std::memcpy(dest, src, static_cast<size_t>(size));
  } else {
    for (int i = 0; i < size; ++i) dest[i] = src[size - 1 - i];
  }
}

// string.pack(fmt, v1, v2, ...)
int l_str_pack(lua_State* L) {
  PackFormat h{L, luaL_checkstring(L, 1)};
  int arg = 1;
  size_t total = 0;
  WorkMeter meter(L);
  lua_pushnil(L);  // keeps the arguments apart from the buffer
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  while (*h.fmt != '\0') {
    int size, pad;
    const Opt opt = ReadDetails(&h, total, &size, &pad);
    total += static_cast<size_t>(pad) + static_cast<size_t>(size);
    for (int i = 0; i < pad; ++i) luaL_addchar(&b, '\0');
    ++arg;
    if (meter.Add(WorkMeter::kPerStep / 8)) return LuaHost::RaiseStop(L);
    switch (opt) {
      case Opt::kInt: {
        const lua_Integer n = luaL_checkinteger(L, arg);
        if (size < kLuaIntSize) {
          const lua_Integer lim = lua_Integer{1} << (size * 8 - 1);
          luaL_argcheck(L, -lim <= n && n < lim, arg, "integer overflow");
        }
        PackInt(&b, static_cast<lua_Unsigned>(n), h.little, size, n < 0);
        break;
      }
      case Opt::kUint: {
        const lua_Integer n = luaL_checkinteger(L, arg);
        if (size < kLuaIntSize) {
          luaL_argcheck(L, static_cast<lua_Unsigned>(n) < (lua_Unsigned{1} << (size * 8)), arg, "unsigned overflow");
        }
        PackInt(&b, static_cast<lua_Unsigned>(n), h.little, size, false);
        break;
      }
      case Opt::kFloat: {
        const float x = static_cast<float>(luaL_checknumber(L, arg));
        CopyOrdered(luaL_prepbuffsize(&b, sizeof x), reinterpret_cast<const char*>(&x), sizeof x, h.little);
        luaL_addsize(&b, sizeof x);
        break;
      }
      case Opt::kNumber:
      case Opt::kDouble: {
        const double x = static_cast<double>(luaL_checknumber(L, arg));
        CopyOrdered(luaL_prepbuffsize(&b, sizeof x), reinterpret_cast<const char*>(&x), sizeof x, h.little);
        luaL_addsize(&b, sizeof x);
        break;
      }
      case Opt::kChar: {
        size_t len;
        const char* s = luaL_checklstring(L, arg, &len);
        luaL_argcheck(L, len <= static_cast<size_t>(size), arg, "string longer than given size");
        if (!AddBytes(&b, &meter, s, len) || !AddZeros(&b, &meter, static_cast<size_t>(size) - len)) {
          return LuaHost::RaiseStop(L);
        }
        break;
      }
      case Opt::kString: {
        size_t len;
        const char* s = luaL_checklstring(L, arg, &len);
        luaL_argcheck(L, size >= static_cast<int>(sizeof(size_t)) || len < (size_t{1} << (size * 8)), arg,
                      "string length does not fit in given size");
        PackInt(&b, static_cast<lua_Unsigned>(len), h.little, size, false);
        if (!AddBytes(&b, &meter, s, len)) return LuaHost::RaiseStop(L);
        total += len;
        break;
      }
      case Opt::kZstr: {
        size_t len;
        const char* s = luaL_checklstring(L, arg, &len);
        luaL_argcheck(L, std::strlen(s) == len, arg, "string contains zeros");
        if (!AddBytes(&b, &meter, s, len)) return LuaHost::RaiseStop(L);
        luaL_addchar(&b, '\0');
        total += len + 1;
        break;
      }
      case Opt::kPadding:
        luaL_addchar(&b, '\0');
        --arg;
        break;
      case Opt::kPadAlign:
      case Opt::kNop:
        --arg;
        break;
    }
  }
  luaL_pushresult(&b);
  meter.Done(L);
  return 1;
}

// string.packsize(fmt)
int l_str_packsize(lua_State* L) {
  PackFormat h{L, luaL_checkstring(L, 1)};
  size_t total = 0;
  WorkMeter meter(L);
  while (*h.fmt != '\0') {
    int size, pad;
    const Opt opt = ReadDetails(&h, total, &size, &pad);
    luaL_argcheck(L, opt != Opt::kString && opt != Opt::kZstr, 1, "variable-length format");
    size += pad;
    luaL_argcheck(L, total <= kMaxSize - static_cast<size_t>(size), 1, "format result too large");
    total += static_cast<size_t>(size);
    if (meter.Add(WorkMeter::kPerStep / 8)) return LuaHost::RaiseStop(L);
  }
  meter.Done(L);
  lua_pushinteger(L, static_cast<lua_Integer>(total));
  return 1;
}

lua_Integer UnpackInt(lua_State* L, const char* s, bool little, int size, bool is_signed) {
  lua_Unsigned n = 0;
  const int used = size <= kLuaIntSize ? size : kLuaIntSize;
  for (int i = used - 1; i >= 0; --i) {
    n = (n << 8) | static_cast<unsigned char>(s[little ? i : size - 1 - i]);
  }
  if (size < kLuaIntSize) {
    if (is_signed) {  // extend the sign
      const lua_Unsigned mask = lua_Unsigned{1} << (size * 8 - 1);
      n = (n ^ mask) - mask;
    }
  } else if (size > kLuaIntSize) {  // the bytes past a lua_Integer must only extend it
    const unsigned char fill = (!is_signed || static_cast<lua_Integer>(n) >= 0) ? 0 : 0xFF;
    for (int i = used; i < size; ++i) {
      if (static_cast<unsigned char>(s[little ? i : size - 1 - i]) != fill) {
        luaL_error(L, "%d-byte integer does not fit into Lua Integer", size);
      }
    }
  }
  return static_cast<lua_Integer>(n);
}

// A 1-based start position (negative: from the end; clipped at 1).
size_t StartPosition(lua_Integer pos, size_t len) {
  if (pos > 0) return static_cast<size_t>(pos);
  if (pos == 0 || pos < -static_cast<lua_Integer>(len)) return 1;
  return len + static_cast<size_t>(pos) + 1;
}

// string.unpack(fmt, s [, pos])
int l_str_unpack(lua_State* L) {
  PackFormat h{L, luaL_checkstring(L, 1)};
  size_t ld;
  const char* data = luaL_checklstring(L, 2, &ld);
  size_t pos = StartPosition(luaL_optinteger(L, 3, 1), ld) - 1;
  int n = 0;
  luaL_argcheck(L, pos <= ld, 3, "initial position out of string");
  WorkMeter meter(L);
  while (*h.fmt != '\0') {
    int size, pad;
    const Opt opt = ReadDetails(&h, pos, &size, &pad);
    luaL_argcheck(L, static_cast<size_t>(pad) + static_cast<size_t>(size) <= ld - pos, 2, "data string too short");
    pos += static_cast<size_t>(pad);
    luaL_checkstack(L, 2, "too many results");
    ++n;
    if (meter.Add(WorkMeter::kPerStep / 8)) return LuaHost::RaiseStop(L);
    switch (opt) {
      case Opt::kInt:
      case Opt::kUint:
        lua_pushinteger(L, UnpackInt(L, data + pos, h.little, size, opt == Opt::kInt));
        break;
      case Opt::kFloat: {
        float x;
        CopyOrdered(reinterpret_cast<char*>(&x), data + pos, sizeof x, h.little);
        lua_pushnumber(L, static_cast<lua_Number>(x));
        break;
      }
      case Opt::kNumber:
      case Opt::kDouble: {
        double x;
        CopyOrdered(reinterpret_cast<char*>(&x), data + pos, sizeof x, h.little);
        lua_pushnumber(L, static_cast<lua_Number>(x));
        break;
      }
      case Opt::kChar:
        lua_pushlstring(L, data + pos, static_cast<size_t>(size));
        if (meter.Add(static_cast<size_t>(size) / 4)) return LuaHost::RaiseStop(L);
        break;
      case Opt::kString: {
        const size_t len = static_cast<size_t>(UnpackInt(L, data + pos, h.little, size, false));
        luaL_argcheck(L, len <= ld - pos - static_cast<size_t>(size), 2, "data string too short");
        lua_pushlstring(L, data + pos + size, len);
        pos += len;
        if (meter.Add(len / 4)) return LuaHost::RaiseStop(L);
        break;
      }
      case Opt::kZstr: {
        const size_t len = std::strlen(data + pos);
        luaL_argcheck(L, pos + len < ld, 2, "unfinished string for format 'z'");
        lua_pushlstring(L, data + pos, len);
        pos += len + 1;
        if (meter.Add(len / 2)) return LuaHost::RaiseStop(L);
        break;
      }
      case Opt::kPadAlign:
      case Opt::kPadding:
      case Opt::kNop:
        --n;
        break;
    }
    pos += static_cast<size_t>(size);
  }
  meter.Done(L);
  lua_pushinteger(L, static_cast<lua_Integer>(pos) + 1);
  return n + 1;
}

const luaL_Reg kStringFunctions[] = {
    {"rep", l_str_rep},           {"lower", l_str_lower},   {"upper", l_str_upper},
    {"reverse", l_str_reverse},   {"format", l_str_format}, {"pack", l_str_pack},
    {"packsize", l_str_packsize}, {"unpack", l_str_unpack}, {nullptr, nullptr},
};

}  // namespace

void RegisterBoundedString(lua_State* L, int table) {
  lua_pushvalue(L, table);
  luaL_setfuncs(L, kStringFunctions, 0);
  lua_pop(L, 1);
}

}  // namespace lua_tasks
