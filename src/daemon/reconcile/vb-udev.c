/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The udev watch: block events about a node vblk runs (a loop device
 * detached by someone else, say) make vblkd look at the kernel again. A
 * burst of events is coalesced: an observe op on the part of each device
 * whose node they were about, or one of the whole daemon for a burst about
 * many; nothing is opened while handling an event. */
#include "config.h"

#include "vb-hotplug.h"
#include "vb-udev.h"

#include <glib-unix.h>
#include <libudev.h>

#define OBSERVE_DELAY_MS 200
/* more devices than this in one burst: one look at everything */
#define OBSERVE_PARTS_MAX 16

typedef struct {
  VbDaemon *daemon;
  struct udev *udev;
  struct udev_monitor *monitor;
  guint pending;
  GHashTable *uuids; /* of the devices whose nodes the burst was about */
} VbUdevWatch;

static VbUdevWatch watch;

/* The names of the devices of watch.uuids, or NULL when one has none (a
 * node whose device went meanwhile) or they are many. */
static GPtrArray *
devices_of_burst (VbDaemon *daemon)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);

  if (g_hash_table_size (watch.uuids) > OBSERVE_PARTS_MAX)
    return NULL;
  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
      if (g_hash_table_contains (watch.uuids, d->uuid))
        g_ptr_array_add (names, g_strdup (d->name));
    }
  return names->len == g_hash_table_size (watch.uuids) ? g_steal_pointer (&names) : NULL;
}

static gboolean
observe_now (gpointer data)
{
  g_autoptr (GPtrArray) names = devices_of_burst (watch.daemon);

  watch.pending = 0;
  g_hash_table_remove_all (watch.uuids);
  /* one that waits, not started yet, will see these events' outcome too:
   * events that keep coming while a long op holds the part (md's during
   * a resync) do not pile up observe ops behind it */
  if (names == NULL && !vb_daemon_queued (watch.daemon, VB_OP_OBSERVE, NULL))
    vb_daemon_submit (watch.daemon, NULL, NULL, VB_OP_OBSERVE, NULL, NULL, NULL, NULL);
  for (guint i = 0; names && i < names->len; i++)
    if (!vb_daemon_queued (watch.daemon, VB_OP_OBSERVE, names->pdata[i]))
      vb_daemon_submit (watch.daemon, names->pdata[i], NULL, VB_OP_OBSERVE, NULL, NULL, NULL, NULL);
  return G_SOURCE_REMOVE;
}

/* The UUID of the running device whose node @devnode is, or NULL. */
static const char *
uuid_of_node (VbDaemon *daemon, const char *devnode)
{
  GHashTableIter iter;
  gpointer uuid, running;

  g_hash_table_iter_init (&iter, daemon->running);
  while (g_hash_table_iter_next (&iter, &uuid, &running))
    if (g_strcmp0 (((VbRunning *) running)->block_device, devnode) == 0)
      return uuid;
  return NULL;
}

static gboolean
on_udev_event (int fd, GIOCondition condition, gpointer data)
{
  struct udev_device *dev;

  while ((dev = udev_monitor_receive_device (watch.monitor)))
    {
      const char *node = udev_device_get_devnode (dev);
      const char *uuid = node ? uuid_of_node (watch.daemon, node) : NULL;
      if (uuid)
        {
          g_hash_table_add (watch.uuids, g_strdup (uuid));
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
  watch.uuids = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
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
