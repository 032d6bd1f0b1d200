/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See loop-util.h. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "loop-util.h"

#include "vb-error.h"
#include "vb-testhook.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define LOOP_CONFIGURE_TRIES 16
#define UDEV_WAIT_MS 10000

char *
vb_loop_get_name (const char *block_device)
{
  struct loop_info64 info = { 0 };
  int fd = open (block_device, O_RDONLY | O_CLOEXEC);
  int r;

  if (fd < 0)
    return NULL;
  r = ioctl (fd, LOOP_GET_STATUS64, &info);
  close (fd);
  if (r < 0)
    return NULL;
  info.lo_file_name[LO_NAME_SIZE - 1] = 0;
  return g_strdup ((char *) info.lo_file_name);
}

gboolean
vb_loop_get_backing (const char *block_device, guint64 *device, guint64 *inode)
{
  struct loop_info64 info = { 0 };
  int fd = open (block_device, O_RDONLY | O_CLOEXEC);
  int r;

  if (fd < 0)
    return FALSE;
  r = ioctl (fd, LOOP_GET_STATUS64, &info);
  close (fd);
  if (r < 0)
    return FALSE;
  *device = info.lo_device;
  *inode = info.lo_inode;
  return TRUE;
}

gboolean
vb_udevd_running (void)
{
  return access ("/run/udev/control", F_OK) == 0;
}

/* Blocks until udevd has announced an event for @devnum with @action, so
 * the caller returns only once udev rules (and /dev/disk links) are done. */
static void
udev_wait_event (struct udev_monitor *monitor, dev_t devnum, const char *action)
{
  gint64 deadline = g_get_monotonic_time () + UDEV_WAIT_MS * 1000;
  struct pollfd pfd = { .fd = udev_monitor_get_fd (monitor), .events = POLLIN };

  for (;;)
    {
      gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
      struct udev_device *dev;

      if (left <= 0)
        {
          g_debug ("loop: no udev '%s' event for %u:%u within %d ms", action, major (devnum),
                   minor (devnum), UDEV_WAIT_MS);
          return;
        }
      if (poll (&pfd, 1, (int) left) <= 0)
        continue;
      dev = udev_monitor_receive_device (monitor);
      if (dev == NULL)
        continue;
      gboolean match = udev_device_get_devnum (dev) == devnum
                       && g_strcmp0 (udev_device_get_action (dev), action) == 0;
      udev_device_unref (dev);
      if (match)
        return;
    }
}

struct _VbUdevWatch {
  struct udev *udev;
  struct udev_monitor *monitor;
};

VbUdevWatch *
vb_udev_watch_begin (void)
{
  VbUdevWatch *watch;

  if (!vb_udevd_running ())
    return NULL;
  watch = g_new0 (VbUdevWatch, 1);
  watch->udev = udev_new ();
  watch->monitor = watch->udev ? udev_monitor_new_from_netlink (watch->udev, "udev") : NULL;
  if (watch->monitor)
    {
      udev_monitor_filter_add_match_subsystem_devtype (watch->monitor, "block", "disk");
      if (udev_monitor_enable_receiving (watch->monitor) < 0)
        g_clear_pointer (&watch->monitor, udev_monitor_unref);
    }
  if (watch->monitor == NULL)
    {
      vb_udev_watch_end (watch, 0, NULL);
      return NULL;
    }
  return watch;
}

void
vb_udev_watch_end (VbUdevWatch *watch, dev_t devnum, const char *action)
{
  if (watch == NULL)
    return;
  if (watch->monitor && devnum != 0 && action)
    udev_wait_event (watch->monitor, devnum, action);
  if (watch->monitor)
    udev_monitor_unref (watch->monitor);
  if (watch->udev)
    udev_unref (watch->udev);
  g_free (watch);
}

dev_t
vb_devnum_of (const char *node)
{
  struct stat st;

  return node && stat (node, &st) == 0 && S_ISBLK (st.st_mode) ? st.st_rdev : 0;
}

static int
loop_configure_free (int backing_fd, const struct loop_config *config, char **block_device)
{
  int control = open ("/dev/loop-control", O_RDWR | O_CLOEXEC);
  int err = 0;

  if (control < 0)
    return -errno;
  /* another process can take the free device between GET_FREE and CONFIGURE */
  for (int tries = 0; tries < LOOP_CONFIGURE_TRIES; tries++)
    {
      int n = ioctl (control, LOOP_CTL_GET_FREE);
      g_autofree char *path = NULL;
      int fd;

      if (n < 0)
        {
          err = -errno;
          break;
        }
      path = g_strdup_printf ("/dev/loop%d", n);
      /* the kernel makes the loop read-only unless the loop node itself is
       * opened for writing; udev's change event on close is awaited anyway */
      fd = open (path,
                 (config->info.lo_flags & LO_FLAGS_READ_ONLY ? O_RDONLY : O_RDWR) | O_CLOEXEC);
      if (fd < 0)
        {
          err = -errno;
          if (err == -ENOENT)
            continue;
          break;
        }
      err = ioctl (fd, LOOP_CONFIGURE, config) < 0 ? -errno : 0;
      close (fd);
      if (err == 0)
        {
          *block_device = g_steal_pointer (&path);
          break;
        }
      if (err != -EBUSY)
        break;
    }
  close (control);
  return err;
}

char *
vb_loop_attach (int backing_fd, const struct loop_config *base, const char *tag, const char *what,
                GError **error)
{
  struct loop_config config = *base;
  VbUdevWatch *watch = vb_udev_watch_begin ();
  char *block_device = NULL;
  int err;

  config.fd = backing_fd;
  memset (config.info.lo_file_name, 0, LO_NAME_SIZE);
  g_strlcpy ((char *) config.info.lo_file_name, tag, LO_NAME_SIZE);
  err = loop_configure_free (backing_fd, &config, &block_device);
  if (err == -EINVAL && (config.info.lo_flags & LO_FLAGS_DIRECT_IO))
    {
      /* a backing file that cannot do direct I/O: buffered, still correct */
      config.info.lo_flags &= ~LO_FLAGS_DIRECT_IO;
      err = loop_configure_free (backing_fd, &config, &block_device);
    }
  if (err < 0)
    g_set_error (error, VB_ERROR, err == -EBUSY ? VB_ERROR_BUSY : VB_ERROR_FAILED,
                 _ ("loop device for '%s': %s"), what, g_strerror (-err));
  else
    {
      vb_test_hook ("start:after-loop-setup");
    }
  vb_udev_watch_end (watch, vb_devnum_of (block_device), "change");
  return block_device;
}

char *
vb_node_of_devnum (dev_t devnum)
{
  g_autofree char *path
      = g_strdup_printf ("/sys/dev/block/%u:%u/uevent", major (devnum), minor (devnum));
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    if (g_str_has_prefix (lines[i], "DEVNAME=") && lines[i][8] != '\0')
      return g_strconcat ("/dev/", lines[i] + 8, NULL);
  return NULL;
}
