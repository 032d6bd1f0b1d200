/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The D-Bus tree: Device and Component objects rebuilt from the desired
 * state and what runs (observed), after every op. */
#include "config.h"

#include "vb-device.h"
#include "vb-engine-jobs.h"
#include "vb-hotplug.h"
#include "vb-objects.h"

#include <stdlib.h>
#include <errno.h>
#include <string.h>

/* Health of component @index of a running engine device, from its backend. */
static gboolean
running_component_status (VbDaemon *daemon, const VbDeviceConfig *config, guint index,
                          gboolean *faulty, gboolean *rebuilding, guint64 *errors)
{
  const VbRunning *r = g_hash_table_lookup (daemon->running, config->uuid);
  const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;

  *faulty = FALSE;
  *rebuilding = FALSE;
  *errors = 0;
  /* only slots are components of the running engine, and they come first */
  if (index >= config->components->len
      || !vb_component_config_is_slot (config->components->pdata[index]))
    return FALSE;
  return backend && backend->engine
         && backend->engine->component_status (r->block_device, index, faulty, rebuilding, errors);
}

const char *
vb_daemon_device_state (VbDaemon *daemon, const VbDeviceConfig *config)
{
  const VbDeviceStatus *st = g_hash_table_lookup (daemon->status, config->name);

  const VbRunning *r = g_hash_table_lookup (daemon->running, config->uuid);

  if (r)
    {
      const VbBackend *backend = vb_backend_lookup (r->backend);
      if (backend && backend->engine && backend->engine->lost_data (r->block_device))
        return "failed";
      for (guint i = 0; i < config->components->len; i++)
        {
          gboolean faulty, rebuilding;
          guint64 errors;
          if (running_component_status (daemon, config, i, &faulty, &rebuilding, &errors)
              && (faulty || rebuilding))
            return "degraded";
        }
      return "active";
    }
  if (st && st->failure && config->started)
    return "failed";
  if (st && !st->complete)
    return "configuring";
  if (st && st->was_started)
    return "stopped";
  return "ready";
}

static const char *component_state (VbDaemon *daemon, const VbDeviceConfig *d, guint index,
                                    const VbComponentConfig *c, guint64 *errors);

const char *
vb_component_state_of (VbDaemon *daemon, const VbDeviceConfig *d, guint index)
{
  guint64 errors;

  return component_state (daemon, d, index, d->components->pdata[index], &errors);
}

static GVariant *
attributes_variant (GHashTable *attributes)
{
  GVariantBuilder b;
  g_autofree gpointer *keys = NULL;
  guint n = 0;

  keys = g_hash_table_get_keys_as_array (attributes, &n);
  qsort (keys, n, sizeof (gpointer), vb_compare_string_pointers);
  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{ss}"));
  for (guint i = 0; i < n; i++)
    g_variant_builder_add (&b, "{ss}", (char *) keys[i],
                           (char *) g_hash_table_lookup (attributes, keys[i]));
  return g_variant_builder_end (&b);
}

static const char *
component_state (VbDaemon *daemon, const VbDeviceConfig *d, guint index, const VbComponentConfig *c,
                 guint64 *errors)
{
  gboolean faulty, rebuilding;
  const VbDeviceStatus *status = g_hash_table_lookup (daemon->status, d->name);

  if (running_component_status (daemon, d, index, &faulty, &rebuilding, errors))
    {
      const VbRunning *r = g_hash_table_lookup (daemon->running, d->uuid);
      const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
      if (faulty
          && ((status && index < 64 && (status->missing & (G_GUINT64_CONSTANT (1) << index)))
              || (backend && backend->engine
                  && backend->engine->component_missing (r->block_device, index))))
        return "missing";
      if (faulty)
        return "faulty";
      if (rebuilding)
        return "rebuilding";
      /* the engine has it: its path may have gone since (an unplugged disk
       * it still holds open), which says nothing about its data */
      if (vb_component_config_is_slot (c))
        return "in-sync";
    }
  if (g_strcmp0 (c->role, "spare") == 0)
    return "spare";
  if (g_strcmp0 (c->role, "faulty") == 0)
    return "faulty";
  if (g_str_has_prefix (c->source, "vblk:"))
    {
      const VbDeviceConfig *dep = vb_state_lookup (daemon->desired, c->source + 5);
      if (dep == NULL)
        return "missing";
      if (g_hash_table_contains (daemon->running, d->uuid)
          && !g_hash_table_contains (daemon->running, dep->uuid))
        return "faulty";
      return "in-sync";
    }
  const VbDeviceStatus *st = g_hash_table_lookup (daemon->status, d->name);
  guint64 bit = index < 64 ? G_GUINT64_CONSTANT (1) << index : 0;
  if (st && (st->missing & bit))
    return "missing";
  /* not running: what its superblocks (or the desired state) say */
  if (st && !g_hash_table_contains (daemon->running, d->uuid) && (st->faulty & bit))
    return "faulty";
  if (st && !g_hash_table_contains (daemon->running, d->uuid) && (st->rebuilding & bit))
    return "rebuilding";
  return "in-sync";
}

static void
sync_components (VbDaemon *daemon, const VbDeviceConfig *d, GPtrArray *paths)
{
  g_autofree char *device_path = vb_device_object_path (d->name);
  guint i;

  for (i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      g_autofree char *path = vb_component_object_path (d->name, i);
      g_autoptr (GDBusObject) existing = g_dbus_object_manager_get_object (
          G_DBUS_OBJECT_MANAGER (daemon->bus->object_manager), path);
      g_autoptr (VbDBusComponent) iface = NULL;

      if (existing)
        iface = vb_dbus_object_get_component (VB_DBUS_OBJECT (existing));
      if (iface == NULL)
        {
          g_autoptr (VbDBusObjectSkeleton) object = vb_dbus_object_skeleton_new (path);
          iface = vb_dbus_component_skeleton_new ();
          vb_component_connect_handlers (daemon, iface);
          vb_dbus_object_skeleton_set_component (object, iface);
          g_dbus_object_manager_server_export (daemon->bus->object_manager,
                                               G_DBUS_OBJECT_SKELETON (object));
        }
      vb_dbus_component_set_source (iface, c->source);
      vb_dbus_component_set_role (iface, c->role);
      guint64 errors = 0;
      vb_dbus_component_set_state (iface, component_state (daemon, d, i, c, &errors));
      vb_dbus_component_set_errors (iface, errors);
      vb_dbus_component_set_device (iface, device_path);
      /* out now, not at the next idle: see sync_device */
      g_dbus_interface_skeleton_flush (G_DBUS_INTERFACE_SKELETON (iface));
      g_ptr_array_add (paths, g_steal_pointer (&path));
    }
  /* components removed since: unexport */
  for (;; i++)
    {
      g_autofree char *path = vb_component_object_path (d->name, i);
      if (!g_dbus_object_manager_server_unexport (daemon->bus->object_manager, path))
        break;
    }
}

static void
sync_device (VbDaemon *daemon, const VbDeviceConfig *d, VbGraph *graph)
{
  g_autofree char *path = vb_device_object_path (d->name);
  VbDBusObjectSkeleton *object = g_hash_table_lookup (daemon->bus->device_objects, d->name);
  g_autoptr (VbDBusDevice) iface = NULL;
  const VbRunning *r = g_hash_table_lookup (daemon->running, d->uuid);
  const VbDeviceStatus *st = g_hash_table_lookup (daemon->status, d->name);
  g_autoptr (GPtrArray) components = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) dependents = g_ptr_array_new_with_free_func (g_free);
  g_auto (GStrv) dep_names = vb_graph_dependents_of (graph, d->name);

  if (object == NULL)
    {
      object = vb_dbus_object_skeleton_new (path);
      VbDBusDevice *dev = vb_dbus_device_skeleton_new ();
      vb_device_connect_handlers (daemon, dev);
      vb_dbus_object_skeleton_set_device (object, dev);
      g_object_unref (dev);
      g_dbus_object_manager_server_export (daemon->bus->object_manager,
                                           G_DBUS_OBJECT_SKELETON (object));
      g_hash_table_insert (daemon->bus->device_objects, g_strdup (d->name), object);
    }
  iface = vb_dbus_object_get_device (VB_DBUS_OBJECT (object));
  sync_components (daemon, d, components);
  g_ptr_array_add (components, NULL);
  for (guint i = 0; dep_names[i]; i++)
    g_ptr_array_add (dependents, vb_device_object_path (dep_names[i]));
  g_ptr_array_add (dependents, NULL);

  g_object_freeze_notify (G_OBJECT (iface));
  vb_dbus_device_set_name (iface, d->name);
  vb_dbus_device_set_uuid (iface, d->uuid);
  vb_dbus_device_set_driver (iface, d->driver);
  vb_dbus_device_set_attributes (iface, attributes_variant (d->attributes));
  vb_dbus_device_set_backend (iface, r ? r->backend : d->backend);
  vb_dbus_device_set_backend_reason (iface, r && r->why ? r->why : "");
  vb_dbus_device_set_state (iface, vb_daemon_device_state (daemon, d));
  vb_dbus_device_set_block_device (iface, r ? r->block_device : "");
  vb_dbus_device_set_size (iface, st ? st->size : 0);
  vb_dbus_device_set_components (iface, (const char *const *) components->pdata);
  vb_dbus_device_set_dependents (iface, (const char *const *) dependents->pdata);
  vb_dbus_device_set_autostart (iface, d->autostart);
  const char *was = g_hash_table_lookup (daemon->reconfigured, d->name);
  vb_dbus_device_set_previous_configuration (iface, was ? was : "");
  /* the config is shared with the ops' snapshots (vb_state_share): read,
   * never touched, not even for a moment */
  g_autoptr (GPtrArray) exports = g_ptr_array_new_full (d->exports->len + 1, NULL);
  g_ptr_array_extend (exports, d->exports, NULL, NULL);
  g_ptr_array_add (exports, NULL);
  vb_dbus_device_set_exports (iface, (const char *const *) exports->pdata);
  g_object_thaw_notify (G_OBJECT (iface));
  /* the changes go out now, in order with what follows on the bus (a job
   * that ends after its device's state changed says so after it: a client
   * that looks at the state once the job ended sees the new one) */
  g_dbus_interface_skeleton_flush (G_DBUS_INTERFACE_SKELETON (iface));
}

/* Device @name's object and its components' taken off the bus. */
static void
unexport_device (VbDaemon *daemon, const char *name)
{
  g_autofree char *path = vb_device_object_path (name);

  for (guint i = 0;; i++)
    {
      g_autofree char *cpath = vb_component_object_path (name, i);
      if (!g_dbus_object_manager_server_unexport (daemon->bus->object_manager, cpath))
        break;
    }
  g_dbus_object_manager_server_unexport (daemon->bus->object_manager, path);
}

void
vb_objects_sync (VbDaemon *daemon)
{
  g_autoptr (VbGraph) graph = vb_graph_new (daemon->desired);
  /* by name: a lookup in the list for each object was O(N²) a change */
  g_autoptr (GHashTable) desired = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter iter;
  gpointer name, object;

  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
      g_hash_table_add (desired, d->name);
      sync_device (daemon, d, graph);
    }

  g_hash_table_iter_init (&iter, daemon->bus->device_objects);
  while (g_hash_table_iter_next (&iter, &name, &object))
    {
      if (g_hash_table_contains (desired, name))
        continue;
      unexport_device (daemon, name);
      g_hash_table_iter_remove (&iter);
    }
  vb_device_waits_check (daemon);
}

void
vb_objects_sync_devices (VbDaemon *daemon, GHashTable *names)
{
  /* the devices' dependents are among them (vb_daemon_publish_sync_devices):
   * a graph of them alone, not of the thousands beside */
  VbState some = { .devices = g_ptr_array_new () };
  g_autoptr (GHashTable) present = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (VbGraph) graph = NULL;
  GHashTableIter iter;
  gpointer name;

  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
      if (!g_hash_table_contains (names, d->name))
        continue;
      g_ptr_array_add (some.devices, (gpointer) d);
      g_hash_table_add (present, d->name);
    }
  graph = vb_graph_new (&some);
  for (guint i = 0; i < some.devices->len; i++)
    sync_device (daemon, some.devices->pdata[i], graph);
  g_hash_table_iter_init (&iter, names);
  while (g_hash_table_iter_next (&iter, &name, NULL))
    if (!g_hash_table_contains (present, name)
        && g_hash_table_contains (daemon->bus->device_objects, name))
      {
        unexport_device (daemon, name);
        g_hash_table_remove (daemon->bus->device_objects, name);
      }
  vb_state_reindex (&some); /* its index, if a lookup built one */
  g_ptr_array_unref (some.devices);
  vb_device_waits_check (daemon);
}

typedef struct {
  VbDaemon *daemon;
  char *uuid;
  guint component;
  int error;
} FailureNote;

static gboolean
publish_failure (gpointer data)
{
  FailureNote *note = data;
  VbDaemon *daemon = note->daemon;

  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
      const VbComponentConfig *c;
      GVariantBuilder details;

      if (g_strcmp0 (d->uuid, note->uuid) != 0 || note->component >= d->components->len)
        continue;
      c = d->components->pdata[note->component];
      const char *why
          = note->error == -ECANCELED ? "marked faulty on request" : g_strerror (-note->error);
      g_warning ("vblk: %s: component %u (%s) failed: %s", d->name, note->component, c->source,
                 why);
      g_variant_builder_init (&details, G_VARIANT_TYPE_VARDICT);
      g_variant_builder_add (&details, "{sv}", "component", g_variant_new_uint32 (note->component));
      g_variant_builder_add (&details, "{sv}", "source", g_variant_new_string (c->source));
      g_variant_builder_add (&details, "{sv}", "error", g_variant_new_string (why));
      vb_objects_sync (daemon);
      vb_objects_emit_event (daemon, "component-failed", d->name, g_variant_builder_end (&details));
      if (strcmp (vb_daemon_device_state (daemon, d), "degraded") == 0)
        vb_objects_emit_event (daemon, "degraded", d->name, NULL);
      vb_hotplug_component_failed (d->name);
      vb_daemon_record_behind (daemon, d->name);
    }
  g_free (note->uuid);
  g_free (note);
  return G_SOURCE_REMOVE;
}

void
vb_daemon_component_failed (const char *uuid, guint component, int error, gpointer user_data)
{
  FailureNote *note = g_new0 (FailureNote, 1);

  note->daemon = user_data;
  note->uuid = g_strdup (uuid);
  note->component = component;
  note->error = error;
  /* the main thread owns all state: publish there */
  g_idle_add (publish_failure, note);
}

void
vb_objects_emit_event (VbDaemon *daemon, const char *kind, const char *device, GVariant *details)
{
  g_autofree char *path = device ? vb_device_object_path (device) : g_strdup ("/");
  GVariantBuilder empty;

  g_message ("vblk: %s: %s", device ? device : "-", kind);
  if (details == NULL)
    {
      g_variant_builder_init (&empty, G_VARIANT_TYPE_VARDICT);
      details = g_variant_builder_end (&empty);
    }
  vb_dbus_manager_emit_event (daemon->bus->manager, kind, path, details);
}

const VbPublish vb_bus_publish = {
  .sync = vb_objects_sync,
  .sync_devices = vb_objects_sync_devices,
  .event = vb_objects_emit_event,
};

static gboolean
read_answered (gpointer data)
{
  vb_daemon_give_back_memory_soon (data);
  return G_SOURCE_REMOVE;
}

/* On GDBus's worker thread: the main thread takes it from there */
static GDBusMessage *
watch_reads (GDBusConnection *connection, GDBusMessage *message, gboolean incoming, gpointer data)
{
  if (incoming && g_dbus_message_get_message_type (message) == G_DBUS_MESSAGE_TYPE_METHOD_CALL
      && g_strcmp0 (g_dbus_message_get_member (message), "GetManagedObjects") == 0)
    g_idle_add (read_answered, data);
  return message;
}

void
vb_objects_watch_reads (VbDaemon *daemon, GDBusConnection *connection)
{
  VbBus *bus = daemon->bus;

  /* once per connection: the name is asked for again on the same one.
   * No reference: a closed connection kept alive would be given back as
   * the system bus (GDBus's singleton), one that cannot own the name. */
  if (bus->reads_watched == connection)
    return;
  if (bus->reads_watched != NULL)
    {
      g_dbus_connection_remove_filter (bus->reads_watched, bus->reads_filter);
      g_object_remove_weak_pointer (G_OBJECT (bus->reads_watched),
                                    (gpointer *) &bus->reads_watched);
    }
  bus->reads_watched = connection;
  if (connection == NULL)
    return;
  g_object_add_weak_pointer (G_OBJECT (connection), (gpointer *) &bus->reads_watched);
  bus->reads_filter = g_dbus_connection_add_filter (connection, watch_reads, daemon, NULL);
}
