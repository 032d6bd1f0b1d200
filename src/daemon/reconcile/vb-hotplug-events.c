/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Hotplug's events: udev block events (and, once at start, every block
 * device already there) coalesced per device node and probed in batches
 * on a worker thread, read-only, for the facts the policy goes by; a loop
 * device detached while held open is found by a poll. vb-hotplug.c decides. */
#include "config.h"

#include "vb-hotplug.h"
#include "vb-hotplug-private.h"
#include "vb-inspect.h"

#include "metadata.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define FLUSH_DELAY_MS 100

static struct {
  VbDaemon *daemon;
  const VbHotplugDecider *decider;
  GHashTable *pending; /* devnode -> VbHotplugItem* (the latest event) */
  guint flush_source;
  gboolean probing;
  int monitor_fd; /* the udev monitor's socket: events not yet read */
} ev = { .monitor_fd = -1 };

static void
item_free (VbHotplugItem *item)
{
  g_free (item->devnode);
  g_free (item->action);
  g_free (item->vblk_node);
  g_clear_pointer (&item->properties, g_hash_table_unref);
  g_free (item);
}

/* probing (worker thread) */

static gboolean
loop_detaching (dev_t devnum)
{
  g_autofree char *path
      = g_strdup_printf ("/sys/dev/block/%u:%u/loop/autoclear", major (devnum), minor (devnum));
  g_autofree char *text = NULL;

  /* losetup -d of a loop device still open only sets autoclear: it goes
   * when the last user closes it. For its users it is gone now. */
  return g_file_get_contents (path, &text, NULL, NULL) && text[0] == '1';
}

static void
probe_item (VbHotplugItem *item)
{
  g_autoptr (GError) error = NULL;
  int fd;

  item->metadata = "none";
  if (strcmp (item->action, "remove") == 0)
    {
      item->gone = TRUE;
      return;
    }
  /* vblk's own nodes look blank; they are never disks to take (a device
   * rebuilt onto its own node deadlocks), whichever vblkd made them */
  if (vb_inspect_is_vblk_node (item->devnum, &item->vblk_node))
    return;
  /* read-only: a close after writing would be a new change event */
  fd = open (item->devnode, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    {
      /* only a node that is no longer there is gone; any other refusal
       * (permissions, a device busy elsewhere) says nothing about it */
      if (errno == ENOENT || errno == ENXIO || errno == ENODEV || errno == ENOMEDIUM)
        item->gone = TRUE;
      else
        item->skip = TRUE;
      return;
    }
  if (ioctl (fd, BLKGETSIZE64, &item->size) < 0 || item->size == 0 || loop_detaching (item->devnum))
    {
      item->gone = TRUE;
      close (fd);
      return;
    }
  item->has_sb = vb_metadata_vblk.probe (fd, item->devnode)
                 && vb_metadata_vblk.read (fd, item->devnode, &item->sb, &error);
  close (fd);
  if (item->has_sb)
    item->metadata = "vblk";
  else if (error != NULL || g_hash_table_contains (item->properties, "ID_FS_TYPE")
           || g_hash_table_contains (item->properties, "ID_PART_TABLE_TYPE"))
    item->metadata = "unknown"; /* another signature, or a damaged vblk one: never touched */
}

static void
probe_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  GPtrArray *items = data;

  for (guint i = 0; i < items->len; i++)
    probe_item (items->pdata[i]);
  g_task_return_boolean (task, TRUE);
}

static void flush_pending (void);

static void
probed (GObject *source, GAsyncResult *result, gpointer data)
{
  GPtrArray *items = data;

  ev.probing = FALSE;
  ev.decider->decide (items);
  g_ptr_array_unref (items);
  /* what came in meanwhile */
  if (g_hash_table_size (ev.pending) > 0 && ev.flush_source == 0)
    flush_pending ();
}

static void
flush_pending (void)
{
  g_autoptr (GTask) task = NULL;
  GPtrArray *items;
  GHashTableIter iter;
  gpointer key, value;

  if (ev.probing || ev.daemon->desired == NULL || ev.daemon->shutting_down)
    return;
  items = g_ptr_array_new_with_free_func ((GDestroyNotify) item_free);
  g_hash_table_iter_init (&iter, ev.pending);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      g_ptr_array_add (items, value);
      g_hash_table_iter_steal (&iter);
    }
  ev.probing = TRUE;
  task = g_task_new (NULL, NULL, probed, items);
  g_task_set_task_data (task, items, NULL);
  g_task_run_in_thread (task, probe_thread);
}

static gboolean
flush_timeout (gpointer data)
{
  ev.flush_source = 0;
  flush_pending ();
  return G_SOURCE_REMOVE;
}

static void
queue (const char *devnode, const char *action, dev_t devnum, GHashTable *properties)
{
  VbHotplugItem *item = g_new0 (VbHotplugItem, 1);

  item->devnode = g_strdup (devnode);
  item->action = g_strdup (action);
  item->devnum = devnum;
  item->properties = properties;
  /* the latest event of a node stands for all of a burst */
  g_hash_table_replace (ev.pending, item->devnode, item);
  if (ev.flush_source == 0)
    ev.flush_source = g_timeout_add (FLUSH_DELAY_MS, flush_timeout, NULL);
}

static GHashTable *
properties_of (struct udev_device *dev)
{
  GHashTable *props = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  struct udev_list_entry *e;

  udev_list_entry_foreach (e, udev_device_get_properties_list_entry (dev)) g_hash_table_insert (
      props, g_strdup (udev_list_entry_get_name (e)), g_strdup (udev_list_entry_get_value (e)));
  return props;
}

void
vb_hotplug_event (struct udev_device *dev)
{
  const char *node = udev_device_get_devnode (dev);
  const char *action = udev_device_get_action (dev);

  if (node == NULL || ev.pending == NULL)
    return;
  queue (node, action ? action : "add", udev_device_get_devnum (dev), properties_of (dev));
}

void
vb_hotplug_coldplug (struct udev *udev)
{
  struct udev_enumerate *en = udev_enumerate_new (udev);
  struct udev_list_entry *e;

  if (en == NULL)
    return;
  udev_enumerate_add_match_subsystem (en, "block");
  udev_enumerate_scan_devices (en);
  udev_list_entry_foreach (e, udev_enumerate_get_list_entry (en))
  {
    struct udev_device *dev = udev_device_new_from_syspath (udev, udev_list_entry_get_name (e));
    if (dev && udev_device_get_devnode (dev) && !vb_hotplug_is_ours (udev_device_get_devnode (dev)))
      queue (udev_device_get_devnode (dev), "add", udev_device_get_devnum (dev),
             properties_of (dev));
    if (dev)
      udev_device_unref (dev);
  }
  udev_enumerate_unref (en);
}

gboolean
vb_hotplug_is_ours (const char *devnode)
{
  GHashTableIter iter;
  gpointer uuid, running;

  g_hash_table_iter_init (&iter, ev.daemon->running);
  while (g_hash_table_iter_next (&iter, &uuid, &running))
    if (g_strcmp0 (((VbRunning *) running)->block_device, devnode) == 0)
      return TRUE;
  return FALSE;
}

/* losetup -d of a loop device that vblk holds open only marks it for
 * detach (autoclear) and sends no event: the slot components of started
 * devices that are loop devices are looked at every second. */
static gboolean
poll_loops (gpointer data)
{
  VbDaemon *daemon = ev.daemon;

  if (daemon->desired == NULL || daemon->shutting_down)
    return G_SOURCE_CONTINUE;
  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
      if (!g_hash_table_contains (daemon->running, d->uuid))
        continue;
      for (guint j = 0; j < d->components->len; j++)
        {
          const VbComponentConfig *c = d->components->pdata[j];
          struct stat st;
          if (!vb_component_config_is_slot (c) || !g_str_has_prefix (c->source, "/dev/loop")
              || stat (c->source, &st) < 0 || !S_ISBLK (st.st_mode)
              || vb_hotplug_slot_failed (daemon, d, j) || !loop_detaching (st.st_rdev))
            continue;
          VbHotplugItem item = { .devnode = c->source, .action = (char *) "detach" };
          ev.decider->gone (&item);
        }
    }
  return G_SOURCE_CONTINUE;
}

void
vb_hotplug_events_watch_fd (int fd)
{
  ev.monitor_fd = fd;
}

/* Events not yet decided: not yet read from the monitor (udev has sent
 * them; the main loop reads them next), waiting to be probed, or being
 * probed. */
gboolean
vb_hotplug_events_undecided (void)
{
  struct pollfd unread = { .fd = ev.monitor_fd, .events = POLLIN };

  return ev.probing || ev.flush_source != 0 || g_hash_table_size (ev.pending) > 0
         || (ev.monitor_fd >= 0 && poll (&unread, 1, 0) > 0);
}

void
vb_hotplug_events_init (VbDaemon *daemon, const VbHotplugDecider *decider)
{
  ev.daemon = daemon;
  ev.decider = decider;
  ev.pending = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) item_free);
  g_timeout_add_seconds (1, poll_loops, NULL);
}
