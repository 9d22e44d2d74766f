# icmp.pyx - ICMP echo over a real link, as `ping -c N` sends it.
#
# The caller gives a raw ICMP socket (SOCK_RAW, IPPROTO_ICMP) already
# connected to the peer, in whatever network namespace it was made in; the
# loop sends `count` echo requests one after another, each waiting for its
# own reply (id and sequence matched, anything else skipped), and times each
# round trip with the TSC and the monotonic clock. A reply that does not come
# within `timeout_ms` ends the loop with EAGAIN: a dead peer is an error
# code, never a hang. Plain C on the fd, no Python inside; the kernel does
# the rest (the first echo after a neighbour flush waits for ARP).

cdef extern from "<sys/socket.h>" nogil:
    ssize_t send(int fd, const void *buf, size_t n, int flags)
    ssize_t recv(int fd, void *buf, size_t n, int flags)
    int setsockopt(int fd, int level, int name, const void *val, unsigned int len)
    enum: SOL_SOCKET, SO_RCVTIMEO

cdef extern from "<sys/time.h>" nogil:
    cdef struct timeval:
        long tv_sec
        long tv_usec

from cpython.exc cimport PyErr_SetFromErrno

cdef extern from "<errno.h>" nogil:
    enum: EAGAIN, EMSGSIZE

cdef enum:
    ICMP_ECHOREPLY = 0
    ICMP_ECHO = 8
    ICMP_HDR = 8            # type, code, checksum, id, sequence
    ICMP_DATA = 56          # ping's default payload: an 84-byte IP packet
    ICMP_PACKET = ICMP_HDR + ICMP_DATA
    ICMP_RXBUF = 2048       # an IP header (up to 60 bytes), ICMP, and room
    ICMP_MAX_COUNT = 4096   # echoes per call: the results live on the stack


cdef inline uint16_t icmp_csum(const uint8_t *p, int n) noexcept nogil:
    """The Internet checksum (RFC 1071): ones' complement of the ones'
    complement sum of 16-bit words, in network byte order throughout."""
    cdef uint32_t sum = 0
    cdef int i = 0
    while i + 1 < n:
        sum += (<uint32_t>p[i] << 8) | p[i + 1]
        i += 2
    if i < n:
        sum += <uint32_t>p[i] << 8
    while sum >> 16:
        sum = (sum & 0xffff) + (sum >> 16)
    return <uint16_t>(~sum & 0xffff)


cdef inline void icmp_echo_fill(uint8_t *pkt, uint16_t ident, uint16_t seq) noexcept nogil:
    cdef int i
    cdef uint16_t c
    pkt[0] = ICMP_ECHO
    pkt[1] = 0
    pkt[2] = 0
    pkt[3] = 0
    pkt[4] = ident >> 8
    pkt[5] = ident & 0xff
    pkt[6] = seq >> 8
    pkt[7] = seq & 0xff
    for i in range(ICMP_DATA):
        pkt[ICMP_HDR + i] = <uint8_t>(0x10 + i)     # ping's pattern: 0x10, 0x11, ...
    c = icmp_csum(pkt, ICMP_PACKET)
    pkt[2] = c >> 8
    pkt[3] = c & 0xff


cdef inline bint icmp_is_reply(const uint8_t *b, ssize_t n, uint16_t ident,
                               uint16_t seq) noexcept nogil:
    """A raw socket hands over the IP header too: skip it (IHL words)."""
    cdef ssize_t ihl
    if n < 20:
        return False
    ihl = (b[0] & 0x0f) * 4
    if n < ihl + ICMP_HDR:
        return False
    b += ihl
    return (b[0] == ICMP_ECHOREPLY and b[1] == 0 and
            ((<uint16_t>b[4] << 8) | b[5]) == ident and
            ((<uint16_t>b[6] << 8) | b[7]) == seq)


cdef int icmp_echo_loop(int fd, uint32_t count, uint16_t ident, uint16_t seq0,
                        uint64_t timeout_ns, uint64_t *cycles, uint64_t *ns,
                        uint32_t *done) noexcept nogil:
    """`count` echoes, each sent once its predecessor's reply came. Returns
    0 or an errno (EAGAIN: no reply within the timeout); `done` counts the
    replies, cycles[i] and ns[i] the round trip of echo i."""
    cdef uint8_t pkt[ICMP_PACKET]
    cdef uint8_t buf[ICMP_RXBUF]
    cdef uint32_t i
    cdef uint16_t seq
    cdef uint64_t t0, w0, now
    cdef ssize_t r
    cdef bint got
    done[0] = 0
    for i in range(count):
        seq = <uint16_t>(seq0 + i)
        icmp_echo_fill(pkt, ident, seq)     # outside the timed span, as ping's is
        w0 = mono_ns()
        t0 = tsc_start()
        while True:
            r = send(fd, pkt, ICMP_PACKET, 0)
            if r >= 0 or errno != EINTR:
                break
        if r < 0:
            return errno
        if r != ICMP_PACKET:
            return EMSGSIZE
        got = False
        while not got:
            r = recv(fd, buf, ICMP_RXBUF, 0)
            if r < 0:
                if errno != EINTR:
                    return errno        # EAGAIN: SO_RCVTIMEO ran out
            else:
                got = icmp_is_reply(buf, r, ident, seq)
            if not got:
                # another echo's reply, or someone else's: within the deadline
                now = mono_ns()
                if now - w0 > timeout_ns:
                    return EAGAIN
        cycles[i] = tsc_stop() - t0
        ns[i] = mono_ns() - w0
        done[0] = i + 1
    return 0


def icmp_echo(int fd, uint32_t count, uint16_t ident, uint16_t seq0=1,
              uint32_t timeout_ms=1000):
    """Send `count` ICMP echo requests on the connected raw ICMP socket
    `fd`, one at a time, each waiting up to `timeout_ms` for its reply.
    Returns (cycles, ns, err): per-echo round trips in TSC cycles and
    nanoseconds for the replies that came (err == 0: all `count` of them),
    and err, 0 or an errno (EAGAIN: a reply did not come in time). Sets
    SO_RCVTIMEO on `fd` to the timeout."""
    if fd < 0:
        raise ValueError(f"not a socket: fd {fd}")
    if count == 0 or count > ICMP_MAX_COUNT:
        raise ValueError(f"count must be 1 to {ICMP_MAX_COUNT}, got {count}")
    if timeout_ms == 0:
        raise ValueError("timeout_ms must be positive")
    cdef timeval tv
    tv.tv_sec = timeout_ms // 1000
    tv.tv_usec = (timeout_ms % 1000) * 1000
    if setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0:
        PyErr_SetFromErrno(OSError)
    cdef uint64_t cycles[ICMP_MAX_COUNT]
    cdef uint64_t ns[ICMP_MAX_COUNT]
    cdef uint32_t done = 0, i
    cdef int err
    cdef uint64_t timeout_ns = <uint64_t>timeout_ms * 1000000
    with nogil:
        err = icmp_echo_loop(fd, count, ident, seq0, timeout_ns, cycles, ns, &done)
    return [cycles[i] for i in range(done)], [ns[i] for i in range(done)], err


def icmp_checksum(bytes data):
    """The checksum icmp_echo puts in its packets, for tests."""
    return icmp_csum(<const uint8_t *><const char *>data, len(data))


ICMP_ECHO_MAX = ICMP_MAX_COUNT
