/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Opening component paths by their type (vb-open.h). */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-open.h"

#include "vb-error.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

const char *
vb_file_type_name (mode_t mode)
{
  switch (mode & S_IFMT)
    {
    case S_IFREG:
      return "a regular file";
    case S_IFBLK:
      return "a block device";
    case S_IFIFO:
      return "a FIFO (named pipe)";
    case S_IFSOCK:
      return "a socket";
    case S_IFDIR:
      return "a directory";
    case S_IFCHR:
      return "a character device";
    case S_IFLNK:
      return "a symbolic link";
    default:
      return "of an unknown type";
    }
}

gboolean
vb_stat_component (const char *path, struct stat *st)
{
  /* O_PATH opens nothing for I/O: no FIFO rendezvous, no device open */
  int fd = open (path, O_PATH | O_CLOEXEC);
  int r, errsv;

  if (fd < 0)
    return FALSE;
  r = fstat (fd, st);
  errsv = errno;
  close (fd);
  if (r < 0)
    {
      errno = errsv;
      return FALSE;
    }
  if (!S_ISREG (st->st_mode) && !S_ISBLK (st->st_mode))
    {
      errno = ENOTBLK;
      return FALSE;
    }
  return TRUE;
}

/* An open of @path that must be what vb_stat_component saw: a path
 * swapped for a FIFO in between is opened non-blocking and refused. */
static int
open_checked (const char *path, int flags, const struct stat *want)
{
  struct stat st;
  int fd = open (path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

  if (fd < 0)
    return -1;
  if (fstat (fd, &st) < 0 || (st.st_mode & S_IFMT) != (want->st_mode & S_IFMT))
    {
      close (fd);
      errno = ENOTBLK;
      return -1;
    }
  /* regular files and block devices ignore O_NONBLOCK; cleared all the same */
  fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

int
vb_open_component (const char *path, VbOpenFlags flags, gboolean *direct)
{
  struct stat st;
  int base = (flags & VB_OPEN_WRITE) ? O_RDWR : O_RDONLY;
  int fd = -1;

  if (direct)
    *direct = FALSE;
  if (!vb_stat_component (path, &st))
    return -1;
  if ((flags & VB_OPEN_EXCLUSIVE) && S_ISBLK (st.st_mode))
    base |= O_EXCL;
  if (flags & VB_OPEN_DIRECT)
    {
      fd = open_checked (path, base | O_DIRECT, &st);
      if (fd >= 0 && direct)
        *direct = TRUE;
      /* tmpfs and some FUSE files refuse O_DIRECT */
      if (fd < 0 && errno != EINVAL)
        return -1;
    }
  if (fd < 0)
    fd = open_checked (path, base, &st);
  return fd;
}

void
vb_component_open_error (GError **error, const char *path, int errsv)
{
  struct stat st;

  if (errsv == ENOTBLK)
    {
      const char *what = lstat (path, &st) == 0 && !S_ISLNK (st.st_mode)
                             ? vb_file_type_name (st.st_mode)
                             : (stat (path, &st) == 0 ? vb_file_type_name (st.st_mode)
                                                      : "of another type");
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("component '%s' is %s: a component is a regular file or a block device"),
                   path, what);
      return;
    }
  if (errsv == EBUSY)
    g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                 _ ("component '%s' is in use (held open exclusively, e.g. by a file system, an "
                    "array or another device)"),
                 path);
  else
    /* a node that is going away (a disk unplugged, a loop device being
     * detached) is as gone as a path that is not there */
    g_set_error (error, VB_ERROR,
                 errsv == ENOENT || errsv == ENXIO || errsv == ENODEV || errsv == ENOMEDIUM
                     ? VB_ERROR_NOT_FOUND
                     : VB_ERROR_FAILED,
                 _ ("component '%s': %s"), path, g_strerror (errsv));
}
