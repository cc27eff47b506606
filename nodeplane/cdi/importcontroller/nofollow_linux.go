package importcontroller

import "syscall"

// syscallNoFollow refuses to open a disk image that is a symlink.
const syscallNoFollow = syscall.O_NOFOLLOW
