// SPDX-License-Identifier: MIT
// GrowArray: a growable array of plain data whose doubling never copies a
// large block.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace lua_tasks {

// mremap is Linux's; elsewhere every size uses realloc.
#ifdef __linux__
inline constexpr bool kCanRemap = true;
#else
inline constexpr bool kCanRemap = false;
#endif

// A std::vector doubles by copying everything into a new array: at a million
// timers that is a 24 MB copy onto freshly faulted pages, which held the loop
// about 9 ms in one Add. Here a large array lives in its own mapping and
// doubles with mremap, which moves page-table entries instead of bytes; a
// small one lives in malloc memory (realloc). Indexing is a plain pointer, as
// in a vector.
template <typename T>
class GrowArray {
  static_assert(std::is_trivially_copyable_v<T>, "GrowArray moves its elements as bytes");

 public:
  // From this many bytes on, the array gets a mapping of its own.
  static constexpr size_t kMapBytes = size_t{1} << 18;

  GrowArray() = default;
  GrowArray(const GrowArray&) = delete;
  GrowArray& operator=(const GrowArray&) = delete;
  GrowArray(GrowArray&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)) {}
  GrowArray& operator=(GrowArray&& o) noexcept {
    if (this != &o) {
      Free();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      cap_ = std::exchange(o.cap_, 0);
    }
    return *this;
  }
  ~GrowArray() { Free(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  // Whether the array is in a mapping of its own: from kMapBytes on, where
  // mremap exists (a failed map throws, so nothing smaller or larger is kept).
  bool mapped() const { return kCanRemap && cap_ * sizeof(T) >= kMapBytes; }

  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

  void push_back(const T& v) {
    if (size_ == cap_) Grow();
    data_[size_++] = v;
  }
  void pop_back() { --size_; }
  // Capacity for `n` elements in all (a power-of-two step at or past n).
  void reserve(size_t n) {
    if (n > cap_) Grow(n);
  }

  // Space for `k` more elements past the end, which the caller fills and
  // then adds with Commit (k or fewer of them): a writer of records of
  // varying size (the state codec) pays one bounds check a record, not one
  // an element. The check is inline and the growth is not.
  T* Room(size_t k) {
    if (cap_ - size_ < k) [[unlikely]]
      Grow(size_ + k);
    return data_ + size_;
  }
  void Commit(size_t k) { size_ += k; }

 private:
  // Doubles the capacity until it holds `need` elements (at least once), or
  // throws std::bad_alloc. Capacities stay powers of two times 16, so a
  // mapping is always whole pages.
  [[gnu::noinline]] void Grow(size_t need = 0);
  void Free();

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
};

// The mapping calls, out of line so that this header stays free of mman.h.
void* MapBytes(size_t bytes);                               // nullptr on failure
void* RemapBytes(void* p, size_t old_bytes, size_t bytes);  // nullptr on failure
void UnmapBytes(void* p, size_t bytes);

template <typename T>
void GrowArray<T>::Grow(size_t need) {
  size_t cap = cap_ == 0 ? 16 : cap_ * 2;
  while (cap < need) cap *= 2;
  const size_t bytes = cap * sizeof(T);
  void* p;
  if (mapped()) {
    p = RemapBytes(data_, cap_ * sizeof(T), bytes);
  } else if (kCanRemap && bytes >= kMapBytes) {
    p = MapBytes(bytes);
    if (p != nullptr) {
      if (size_ > 0) std::memcpy(p, data_, size_ * sizeof(T));  // under kMapBytes
      std::free(data_);
    }
  } else {
    p = std::realloc(data_, bytes);
  }
  if (p == nullptr) throw std::bad_alloc();
  data_ = static_cast<T*>(p);
  cap_ = cap;
}

template <typename T>
void GrowArray<T>::Free() {
  if (mapped()) {
    UnmapBytes(data_, cap_ * sizeof(T));
  } else {
    std::free(data_);
  }
}

}  // namespace lua_tasks
