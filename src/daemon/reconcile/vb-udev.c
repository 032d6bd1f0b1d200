/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The udev watch: block events about a node vblk runs (a loop device
 * detached by someone else, say) make vblkd look at the kernel again. A
 * burst of events is coalesced into one observe op; nothing is opened
 * while handling an event. */
#include "config.h"

#include "vb-hotplug.h"
#include "vb-udev.h"

#include <glib-unix.h>
#include <libudev.h>

#define OBSERVE_DELAY_MS 200

typedef struct {
  VbDaemon *daemon;
  struct udev *udev;
  struct udev_monitor *monitor;
  guint pending;
} VbUdevWatch;

static VbUdevWatch watch;

static gboolean
observe_now (gpointer data)
{
  watch.pending = 0;
  vb_daemon_submit (watch.daemon, NULL, NULL, VB_OP_OBSERVE, NULL, NULL, NULL, NULL);
  return G_SOURCE_REMOVE;
}

static gboolean
is_ours (VbDaemon *daemon, const char *devnode)
{
  GHashTableIter iter;
  gpointer uuid, running;

  g_hash_table_iter_init (&iter, daemon->running);
  while (g_hash_table_iter_next (&iter, &uuid, &running))
    if (g_strcmp0 (((VbRunning *) running)->block_device, devnode) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
on_udev_event (int fd, GIOCondition condition, gpointer data)
{
  struct udev_device *dev;

  while ((dev = udev_monitor_receive_device (watch.monitor)))
    {
      const char *node = udev_device_get_devnode (dev);
      if (node && is_ours (watch.daemon, node))
        {
          if (watch.pending == 0)
            watch.pending = g_timeout_add (OBSERVE_DELAY_MS, observe_now, NULL);
        }
      else if (node)
        vb_hotplug_event (dev); /* anything else goes through the policy */
      udev_device_unref (dev);
    }
  return G_SOURCE_CONTINUE;
}

void
vb_udev_coldplug (void)
{
  if (watch.udev)
    vb_hotplug_coldplug (watch.udev);
}

void
vb_udev_watch (VbDaemon *daemon)
{
  int fd;

  watch.daemon = daemon;
  vb_hotplug_init (daemon);
  watch.udev = udev_new ();
  if (watch.udev == NULL)
    return;
  watch.monitor = udev_monitor_new_from_netlink (watch.udev, "udev");
  /* a shelf of disks powering up: hundreds of events at once */
  if (watch.monitor)
    udev_monitor_set_receive_buffer_size (watch.monitor, 64 * 1024 * 1024);
  if (watch.monitor == NULL
      || udev_monitor_filter_add_match_subsystem_devtype (watch.monitor, "block", NULL) < 0
      || udev_monitor_enable_receiving (watch.monitor) < 0)
    {
      g_warning ("vblk: no udev monitor; changes made outside vblk are seen only at restart");
      return;
    }
  fd = udev_monitor_get_fd (watch.monitor);
  g_unix_fd_add (fd, G_IO_IN, on_udev_event, NULL);
  vb_hotplug_watch_fd (fd);
}
