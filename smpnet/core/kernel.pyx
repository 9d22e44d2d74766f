# kernel.pyx - the host kernel's own costs, measured with real syscalls.
#
# TCP request/response (tbench's and netperf TCP_RR's pattern): one byte
# each way on a connected socket, N transactions between two TSC reads.
# Nothing here models kernel code: the kernel runs it. The loop is plain C
# on the socket's fd (send/recv, MSG_NOSIGNAL so a closed peer is an error
# code, not SIGPIPE), retries EINTR, and stops at the first error, which it
# returns as a code: never an exception, never a Python call inside.

cdef extern from "<sys/socket.h>" nogil:
    ssize_t send(int fd, const void *buf, size_t n, int flags)
    ssize_t recv(int fd, void *buf, size_t n, int flags)
    enum: MSG_NOSIGNAL

cdef enum:
    RR_EOF = -1     # the peer closed the connection (recv returned 0)


cdef inline int rr_send(int fd, char *b) noexcept nogil:
    cdef ssize_t r
    while True:
        r = send(fd, b, 1, MSG_NOSIGNAL)
        if r == 1:
            return 0
        if r < 0 and errno == EINTR:
            continue
        return errno if r < 0 else EIO


cdef inline int rr_recv(int fd, char *b) noexcept nogil:
    cdef ssize_t r
    while True:
        r = recv(fd, b, 1, 0)
        if r == 1:
            return 0
        if r == 0:
            return RR_EOF
        if errno == EINTR:
            continue
        return errno


cdef int tcp_rr_loop(int fd, uint64_t n, bint client, uint64_t *done,
                     uint64_t *cycles) noexcept nogil:
    """n transactions: the client sends a byte and waits for the reply, the
    server waits for a byte and sends one back. Returns 0, an errno, or
    RR_EOF; `done` counts the whole transactions, `cycles` the TSC cycles."""
    cdef char b = 120   # 'x'
    cdef int err = 0
    cdef uint64_t i = 0, t0 = tsc_start()
    while i < n:
        if client:
            err = rr_send(fd, &b)
            if err == 0:
                err = rr_recv(fd, &b)
        else:
            err = rr_recv(fd, &b)
            if err == 0:
                err = rr_send(fd, &b)
        if err != 0:
            break
        i += 1
    cycles[0] = tsc_stop() - t0
    done[0] = i
    return err


def tcp_rr(int fd, uint64_t transactions, bint client):
    """Run `transactions` one-byte request/response transactions on the
    connected socket `fd`, as the client (send, then recv) or the server
    (recv, then send). Returns (cycles, wall_ns, done, err): err is 0, an
    errno (EAGAIN for a receive timeout set on the socket), or -1 when the
    peer closed the connection; done counts the completed transactions."""
    if fd < 0:
        raise ValueError(f"not a socket: fd {fd}")
    cdef uint64_t done = 0, cycles = 0, w0, w1
    cdef int err
    with nogil:
        w0 = mono_ns()
        err = tcp_rr_loop(fd, transactions, client, &done, &cycles)
        w1 = mono_ns()
    return cycles, w1 - w0, done, err


RR_PEER_CLOSED = RR_EOF
