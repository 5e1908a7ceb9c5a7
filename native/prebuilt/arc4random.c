/* SPDX-License-Identifier: MIT */
/* arc4random for the prebuilt binary: keeps its glibc floor at 2.34.
 *
 * The libstdc++ linked into the prebuilt (g++ 12, built on glibc 2.36) draws
 * std::random_device's bytes from arc4random, which glibc added in 2.36; every
 * other symbol the shipped files use is 2.34 or older. Defined here, the
 * static link binds libstdc++'s call to this copy (hidden, like every symbol
 * of the addon), over getrandom (glibc 2.25). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>

uint32_t arc4random(void) {
  uint32_t v;
  unsigned char* p = (unsigned char*)&v;
  size_t got = 0;
  while (got < sizeof v) {
    ssize_t n = getrandom(p + got, sizeof v - got, 0);
    if (n > 0) {
      got += (size_t)n;
    } else if (n < 0 && errno != EINTR) {
      abort(); /* arc4random cannot fail; the kernel has getrandom since 3.17 */
    }
  }
  return v;
}
