/* A wall clock that can be stepped, for the clock-step fault tests (tests/test_clock_steps.py).
 *
 * LD_PRELOADed into one process, it adds an offset to CLOCK_REALTIME (and its coarse variant),
 * gettimeofday() and time(): what a host's clock step does. CLOCK_MONOTONIC and sleeping are
 * untouched, as a real step leaves them (libfaketime fakes both or breaks Python's time.sleep).
 * The offset, in nanoseconds, is the first 8 bytes of the file named by FIXGW_CLOCK_OFFSET_FILE,
 * mapped once and read on every call, so a test steps the clock by writing to that file.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_ns;
static int (*real_clock_gettime)(clockid_t, struct timespec *);

static void setup(void) {
    if (!real_clock_gettime)
        real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    if (!offset_ns) {
        const char *path = getenv("FIXGW_CLOCK_OFFSET_FILE");
        int fd = path ? open(path, O_RDONLY) : -1;
        if (fd >= 0) {
            void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
            close(fd);
            if (p != MAP_FAILED)
                offset_ns = (volatile int64_t *)p;
        }
    }
}

static void shift(struct timespec *ts) {
    if (!offset_ns)
        return;
    int64_t ns = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + *offset_ns;
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    setup();
    int rc = real_clock_gettime(clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE))
        shift(ts);
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
