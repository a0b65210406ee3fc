#define _GNU_SOURCE
#include <stddef.h>
#include <sys/socket.h>
#include "CSystemLinux.h"

int csys_accept4(int fd, int flags) { return accept4(fd, NULL, NULL, flags); }
