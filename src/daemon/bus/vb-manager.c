/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.vblk.VBlk1.Manager: CreateDevice, Apply, Scan, and the properties
 * describing drivers and backends. */
#include "config.h"

#include "vb-auth.h"
#include "vb-jobs.h"
#include "vb-manager.h"
#include "vb-request.h"
#include "vb-scan.h"
#include "vb-wipe.h"

#include <glib/gi18n.h>
#include <string.h>

static const char *const create_options[] = { "backend:s", "start:b", "autostart:b", NULL };

/* @components, one slot each, in order. */
static gboolean
add_components (VbDeviceConfig *d, const VbDriver *driver, const char *const *components,
                GError **error)
{
  for (guint i = 0; components[i]; i++)
    {
      const char *source = components[i];
      VbSourceKind kind;
      g_autofree char *role = g_strdup_printf ("%u", i);
      g_autofree char *cuuid = vb_uuid_new ();

      if (!vb_source_parse (source, &kind, NULL, error))
        return FALSE;
      for (guint j = 0; j < i; j++)
        if (strcmp (components[j], source) == 0)
          {
            g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                         _ ("component '%s': given twice"), source);
            return FALSE;
          }
      g_ptr_array_add (d->components, vb_component_config_new (source, role, cuuid));
    }
  if (d->components->len > driver->max_components)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("components: driver '%s' takes at most %u, %u given"), driver->name,
                   driver->max_components, d->components->len);
      return FALSE;
    }
  return TRUE;
}

/* A valid name no device of @candidate has. */
static gboolean
name_is_free (const VbState *candidate, const char *name, GError **error)
{
  if (!vb_name_is_valid (name, "name", error))
    return FALSE;
  if (vb_state_lookup (candidate, name))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_ALREADY_EXISTS, _ ("device '%s' already exists"),
                   name);
      return FALSE;
    }
  return TRUE;
}

gboolean
vb_mutate_create_device (VbState *candidate, VbDeviceConfig *config, gboolean start,
                         VbOpIntent *intent, GError **error)
{
  g_autoptr (VbDeviceConfig) d = config;
  g_autoptr (VbGraph) graph = NULL;
  const char *name = d->name;

  if (!name_is_free (candidate, name, error))
    return FALSE;
  if (g_strcmp0 (g_hash_table_lookup (d->attributes, "metadata"), "md1") == 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("attribute 'metadata': md1 belongs to arrays mdadm made, which vblk adopts "
                      "(vbmgr scan --adopt) but does not create"));
      return FALSE;
    }
  if (strcmp (d->backend, "auto") != 0
      && vb_backend_choose (d->backend, vb_driver_lookup (d->driver), d->attributes, NULL, error)
             == NULL)
    return FALSE;
  for (guint i = 0; i < d->components->len; i++)
    {
      VbComponentConfig *c = d->components->pdata[i];
      if (c->uuid == NULL)
        c->uuid = vb_uuid_new ();
    }
  if (d->uuid == NULL)
    d->uuid = vb_uuid_new ();
  g_ptr_array_add (candidate->devices, g_steal_pointer (&d));
  /* a new device: a cycle or a missing vblk:NAME can only be below it */
  graph = vb_graph_new_below (candidate, name);
  if (!vb_graph_check (graph, error))
    return FALSE;
  vb_op_intent_touch (intent, name);
  if (start)
    vb_op_intent_start (intent, candidate, name);
  return TRUE;
}

static gboolean
mutate_create (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
               GError **error)
{
  VbRequest *req = user_data;
  const VbDriver *driver;
  g_autoptr (VbDeviceConfig) d = NULL;
  g_autofree char *backend = NULL;
  GHashTable *resolved;

  /* the name first: an existing one is refused whatever else is wrong */
  if (!name_is_free (candidate, req->name, error))
    return FALSE;
  driver = vb_driver_lookup (req->driver);
  if (driver == NULL)
    {
      g_autofree char *known = vb_drivers_known_names ();
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("driver '%s': unknown (known: %s)"), req->driver, known);
      return FALSE;
    }
  resolved = vb_driver_resolve_attributes (driver, NULL, req->attributes, error);
  if (resolved == NULL)
    return FALSE;
  if (!g_variant_lookup (req->options, "backend", "s", &backend))
    backend = g_strdup ("auto");
  d = vb_device_config_new (req->name, NULL, driver->name, backend);
  g_hash_table_unref (d->attributes);
  d->attributes = resolved;
  d->autostart = vb_options_get_bool (req->options, "autostart", TRUE);
  if (!add_components (d, driver, (const char *const *) req->components, error))
    return FALSE;
  if (!vb_mutate_create_device (candidate, g_steal_pointer (&d),
                                vb_options_get_bool (req->options, "start", FALSE), intent, error))
    return FALSE;
  g_free (req->result_path);
  req->result_path = vb_device_object_path (req->name);
  return TRUE;
}

static void
create_authorized (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VbRequest *req = user_data;
  g_autoptr (GError) error = NULL;

  if (!vb_options_check (req->options, create_options, &error))
    {
      vb_invocation_return_gerror (invocation, error);
      vb_request_free (req);
      return;
    }
  vb_daemon_submit (daemon, req->name, mutate_create, VB_OP_CHANGE, "create", vb_request_done, req,
                    (GDestroyNotify) vb_request_free);
}

static gboolean
handle_create_device (VbDBusManager *iface, GDBusMethodInvocation *invocation, const char *name,
                      const char *driver, GVariant *attributes, const char *const *components,
                      GVariant *options, VbDaemon *daemon)
{
  VbRequest *req = vb_request_new (invocation, name, options);

  req->driver = g_strdup (driver);
  req->attributes = vb_attributes_from_variant (attributes);
  req->components = g_strdupv ((char **) components);
  vb_auth_check (daemon, invocation, "org.vblk.manage", name, create_authorized, req,
                 (GDestroyNotify) vb_request_free);
  return TRUE;
}

/* Dump and ListDevices */
static const char *const dump_options[] = { NULL };

static gboolean
handle_dump (VbDBusManager *iface, GDBusMethodInvocation *invocation, GVariant *options,
             VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *json = NULL;

  if (!vb_options_check (options, dump_options, &error))
    {
      vb_invocation_return_gerror (invocation, error);
      return TRUE;
    }
  json = vb_spec_to_json (daemon->desired);
  g_dbus_method_invocation_return_value (invocation, g_variant_new ("(s)", json));
  return TRUE;
}

static const char *
or_empty (const char *text)
{
  return text ? text : "";
}

/* ListDevices: the rows of `vbmgr list`, from the Device objects */
static gboolean
handle_list_devices (VbDBusManager *iface, GDBusMethodInvocation *invocation, GVariant *options,
                     VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  GVariantBuilder rows;

  if (!vb_options_check (options, dump_options, &error))
    {
      vb_invocation_return_gerror (invocation, error);
      return TRUE;
    }
  g_variant_builder_init (&rows, G_VARIANT_TYPE ("a(sssstso)"));
  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
      GDBusObject *object = g_hash_table_lookup (daemon->bus->device_objects, d->name);
      g_autoptr (VbDBusDevice) dev
          = object ? vb_dbus_object_get_device (VB_DBUS_OBJECT (object)) : NULL;

      if (dev == NULL)
        continue; /* not published yet */
      g_variant_builder_add (
          &rows, "(sssstso)", or_empty (vb_dbus_device_get_name (dev)),
          or_empty (vb_dbus_device_get_driver (dev)), or_empty (vb_dbus_device_get_backend (dev)),
          or_empty (vb_dbus_device_get_state (dev)), vb_dbus_device_get_size (dev),
          or_empty (vb_dbus_device_get_block_device (dev)), g_dbus_object_get_object_path (object));
    }
  g_dbus_method_invocation_return_value (invocation, g_variant_new ("(a(sssstso))", &rows));
  return TRUE;
}

/* Scan: superblocks read on a worker thread, grouped on the main thread;
 * with adopt, the adoptable groups are added in one op. A stack comes back
 * level by level: once the devices found run (known ones, or adopted and
 * started), their block nodes carry the superblocks of the devices built
 * on them, so those nodes are read in turn, until nothing new appears. */

static const char *const scan_options[] = { "paths:as", "adopt:b", "start:b", NULL };

/* levels of a stack read (the engine nests devices at most 8 deep) */
#define SCAN_MAX_LEVELS 8

typedef struct {
  VbDaemon *daemon;
  GDBusMethodInvocation *invocation;
  GVariant *options;
  char **paths;       /* explicit paths, or NULL */
  char **state_paths; /* default scan: component paths of the desired state */
  char **next;        /* the block nodes the next level is read from */
  gboolean adopt, start;
  guint level;
  GHashTable *adopted; /* UUIDs adopted by this scan, at any level */
  VbScan *scan;
  VbJob *job; /* "scan", while it runs */
} ScanRequest;

static void
scan_request_free (ScanRequest *req)
{
  g_clear_object (&req->invocation);
  g_clear_pointer (&req->options, g_variant_unref);
  g_strfreev (req->paths);
  g_strfreev (req->state_paths);
  g_strfreev (req->next);
  g_clear_pointer (&req->adopted, g_hash_table_unref);
  vb_scan_free (req->scan);
  if (req->job && vb_job_is_running (req->job))
    vb_job_finish (req->job, "failed", "ended before it was done");
  g_clear_pointer (&req->job, vb_job_unref);
  g_free (req);
}

/* The result: the groups as the desired state has them now, those this
 * scan adopted (at any level) marked so. */
static void
scan_return (ScanRequest *req)
{
  g_auto (GStrv) devices = NULL;
  gboolean left_unstarted = FALSE;

  vb_scan_group (req->scan, req->daemon->desired);
  for (guint i = 0; i < req->scan->groups->len; i++)
    {
      VbScanGroup *g = req->scan->groups->pdata[i];
      g->adopted = g_hash_table_contains (req->adopted, g->uuid);
      left_unstarted |= g->adopted && !req->start;
    }
  /* what is built on them is on their nodes, which only a start makes */
  for (guint i = 0; left_unstarted && i < req->scan->groups->len; i++)
    {
      VbScanGroup *g = req->scan->groups->pdata[i];
      if (g->adopted)
        g->note = "not started: devices built on it are found on its block node once it runs "
                  "(vbmgr scan --adopt --start, or vbmgr start and scan again)";
    }
  devices = vb_scan_device_paths (req->scan);
  if (req->job)
    {
      guint found = req->scan->groups->len;
      g_autofree char *summary = g_strdup_printf (
          ngettext ("%u device found, %u adopted", "%u devices found, %u adopted", found), found,
          g_hash_table_size (req->adopted));
      vb_job_finish (req->job, "finished", summary);
    }
  g_dbus_method_invocation_return_value (
      req->invocation, g_variant_new ("(^ao@aa{sv})", devices, vb_scan_found_variant (req->scan)));
  g_clear_object (&req->invocation);
}

static gboolean
mutate_adopt (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
              GError **error)
{
  ScanRequest *req = user_data;
  g_autoptr (VbGraph) graph = NULL;

  /* against the state as it is now, not as it was when the scan began */
  vb_scan_group (req->scan, candidate);
  for (guint i = 0; i < req->scan->groups->len; i++)
    {
      VbScanGroup *g = req->scan->groups->pdata[i];
      VbDeviceConfig *d;

      if (g->config == NULL)
        continue;
      d = vb_device_config_copy (g->config);
      d->started = req->start;
      g_ptr_array_add (candidate->devices, d);
      vb_op_intent_touch (intent, d->name);
      g->adopted = TRUE;
    }
  graph = vb_graph_new (candidate);
  return vb_graph_check (graph, error);
}

static void scan_read_done (GObject *source, GAsyncResult *result, gpointer user_data);

static void
scan_read_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  ScanRequest *req = task_data;

  if (req->next)
    vb_scan_read (req->scan, (const char *const *) req->next, FALSE);
  else if (req->paths)
    vb_scan_read (req->scan, (const char *const *) req->paths, TRUE);
  else
    {
      g_auto (GStrv) paths = vb_scan_default_paths ((const char *const *) req->state_paths);
      vb_scan_read (req->scan, (const char *const *) paths, FALSE);
    }
  g_task_return_boolean (task, TRUE);
}

static void
scan_read (ScanRequest *req)
{
  g_autoptr (GTask) task = g_task_new (NULL, NULL, scan_read_done, req);

  /* the task always completes; scan_read_done owns @req then */
  g_task_set_task_data (task, req, NULL);
  g_task_run_in_thread (task, scan_read_thread);
}

/* One level done: the next one is read from the nodes of the devices
 * found that run now, or the scan answers. */
static void
scan_level_done (ScanRequest *req)
{
  g_autoptr (GHashTable) nodes = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; i < req->daemon->desired->devices->len; i++)
    {
      const VbDeviceConfig *d = req->daemon->desired->devices->pdata[i];
      const VbRunning *r = g_hash_table_lookup (req->daemon->running, d->uuid);
      if (r && r->block_device)
        g_hash_table_insert (nodes, d->name, r->block_device);
    }
  vb_scan_group (req->scan, req->daemon->desired);
  g_strfreev (req->next);
  req->next = vb_scan_next_nodes (req->scan, nodes);
  if (req->next[0] != NULL && ++req->level < SCAN_MAX_LEVELS)
    {
      scan_read (req);
      return;
    }
  scan_return (req);
  scan_request_free (req);
}

static void
adopt_done (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  ScanRequest *req = user_data;

  if (error)
    {
      g_autoptr (GError) copy = g_error_copy (error);

      g_prefix_error (&copy, _ ("adopting: "));
      if (req->job)
        vb_job_finish (req->job, "failed", copy->message);
      vb_invocation_return_gerror (req->invocation, copy);
      scan_request_free (req);
      return;
    }
  for (guint i = 0; i < req->scan->groups->len; i++)
    {
      VbScanGroup *g = req->scan->groups->pdata[i];
      if (g->adopted)
        g_hash_table_add (req->adopted, g_strdup (g->uuid));
    }
  scan_level_done (req);
}

static void
scan_read_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  ScanRequest *req = user_data;
  gboolean any = FALSE;

  vb_scan_group (req->scan, req->daemon->desired);
  for (guint i = 0; req->adopt && i < req->scan->groups->len; i++)
    any |= ((VbScanGroup *) req->scan->groups->pdata[i])->config != NULL;
  if (!any)
    {
      scan_level_done (req);
      return;
    }
  /* @req outlives the op: the next level may follow */
  vb_daemon_submit (req->daemon, NULL, mutate_adopt, VB_OP_CHANGE, "scan", adopt_done, req, NULL);
}

static void
scan_authorized (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
{
  ScanRequest *req = user_data;
  g_autoptr (GError) error = NULL;

  if (!vb_options_check (req->options, scan_options, &error))
    goto fail;
  req->start = vb_options_get_bool (req->options, "start", FALSE);
  if (req->start && !req->adopt)
    {
      g_set_error (&error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("option 'start': only together with adopt"));
      goto fail;
    }
  if (g_variant_lookup (req->options, "paths", "^as", &req->paths))
    {
      for (guint i = 0; req->paths[i]; i++)
        if (!g_path_is_absolute (req->paths[i]))
          {
            g_set_error (&error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                         _ ("option 'paths': '%s' is not an absolute path"), req->paths[i]);
            goto fail;
          }
    }
  else
    {
      /* the components the desired state names, wherever they are */
      g_autoptr (GPtrArray) extra = g_ptr_array_new_with_free_func (g_free);
      for (guint i = 0; i < daemon->desired->devices->len; i++)
        {
          const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
          for (guint j = 0; j < d->components->len; j++)
            {
              const VbComponentConfig *c = d->components->pdata[j];
              VbSourceKind kind;
              if (vb_source_parse (c->source, &kind, NULL, NULL) && kind == VB_SOURCE_PATH)
                g_ptr_array_add (extra, g_strdup (c->source));
            }
        }
      g_ptr_array_add (extra, NULL);
      req->state_paths = (char **) g_ptr_array_free (g_steal_pointer (&extra), FALSE);
    }

  req->scan = vb_scan_new ();
  req->scan->instance = g_strdup (daemon->instance);
  req->adopted = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  {
    const char *objects[] = { VB_OBJECT_ROOT "/Manager", NULL };
    req->job = vb_job_new (daemon, "scan", objects, 0, NULL, NULL);
    vb_job_set_started_by (req->job, invocation);
  }
  scan_read (req);
  return;

fail:
  vb_invocation_return_gerror (invocation, error);
  scan_request_free (req);
}

static gboolean
handle_scan (VbDBusManager *iface, GDBusMethodInvocation *invocation, GVariant *options,
             VbDaemon *daemon)
{
  ScanRequest *req = g_new0 (ScanRequest, 1);

  req->daemon = daemon;
  req->invocation = g_object_ref (invocation);
  req->options = g_variant_ref (options);
  req->adopt = vb_options_get_bool (options, "adopt", FALSE);
  /* reading needs no authorization (vblkd reads as root); adopting does */
  if (req->adopt)
    vb_auth_check (daemon, invocation, "org.vblk.manage", NULL, scan_authorized, req,
                   (GDestroyNotify) scan_request_free);
  else
    scan_authorized (daemon, invocation, req);
  return TRUE;
}

/* Wipe: authorized, then checked and done on a worker thread against a
 * copy of the desired state and the started devices of the moment. */
typedef struct {
  GDBusMethodInvocation *invocation;
  char *path;
  gboolean force, md;
  VbState *state;
  GHashTable *started; /* device UUIDs */
} WipeRequest;

static void
wipe_request_free (WipeRequest *req)
{
  g_object_unref (req->invocation);
  g_free (req->path);
  if (req->state)
    vb_state_free (req->state);
  if (req->started)
    g_hash_table_unref (req->started);
  g_free (req);
}

static void
wipe_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  WipeRequest *req = task_data;
  GError *error = NULL;
  char **erased = NULL;

  if (vb_wipe (req->path, req->state, req->started, req->force, req->md, &erased, &error))
    g_task_return_pointer (task, erased, (GDestroyNotify) g_strfreev);
  else
    g_task_return_error (task, error);
}

static void
wipe_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  WipeRequest *req = user_data;
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) erased = g_task_propagate_pointer (G_TASK (result), &error);

  if (erased == NULL)
    vb_invocation_return_gerror (req->invocation, error);
  else
    {
      g_autofree char *what = g_strjoinv (", ", erased);
      g_message ("vblk: wiped %s from %s", what, req->path);
      g_dbus_method_invocation_return_value (req->invocation, g_variant_new ("(^as)", erased));
    }
  wipe_request_free (req);
}

static void
wipe_authorized (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
{
  WipeRequest *req = user_data;
  g_autoptr (GTask) task = NULL;

  req->state = vb_state_copy (daemon->desired);
  req->started = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
      if (g_hash_table_contains (daemon->running, d->uuid))
        g_hash_table_add (req->started, g_strdup (d->uuid));
    }
  task = g_task_new (NULL, NULL, wipe_done, req);
  g_task_set_task_data (task, req, NULL);
  g_task_run_in_thread (task, wipe_thread);
}

static const char *const wipe_options[] = { "force:b", "md:b", NULL };

static gboolean
handle_wipe (VbDBusManager *iface, GDBusMethodInvocation *invocation, const char *path,
             GVariant *options, VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  WipeRequest *req;

  if (!vb_options_check (options, wipe_options, &error))
    {
      vb_invocation_return_gerror (invocation, error);
      return TRUE;
    }
  if (!g_path_is_absolute (path))
    {
      g_dbus_method_invocation_return_error (invocation, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                                             _ ("path '%s': not an absolute path"), path);
      return TRUE;
    }
  req = g_new0 (WipeRequest, 1);
  req->invocation = g_object_ref (invocation);
  req->path = g_strdup (path);
  req->force = vb_options_get_bool (options, "force", FALSE);
  req->md = vb_options_get_bool (options, "md", FALSE);
  vb_auth_check (daemon, invocation, "org.vblk.delete", NULL, wipe_authorized, req,
                 (GDestroyNotify) wipe_request_free);
  return TRUE;
}

static GVariant *
drivers_variant (void)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{sa(sssb)}"));
  for (const VbDriver *const *d = vb_drivers (); *d; d++)
    {
      GVariantBuilder attrs;
      static const char *const types[] = { "bool", "uint", "size", "choice" };
      g_variant_builder_init (&attrs, G_VARIANT_TYPE ("a(sssb)"));
      for (const VbAttrSpec *a = (*d)->attributes; a && a->name; a++)
        g_variant_builder_add (&attrs, "(sssb)", a->name, types[a->type], a->default_value,
                               a->online);
      g_variant_builder_add (&b, "{sa(sssb)}", (*d)->name, &attrs);
    }
  return g_variant_builder_end (&b);
}

static GVariant *
backends_variant (void)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{s(bs)}"));
  for (const VbBackend *const *be = vb_backends (); *be; be++)
    {
      g_autofree char *reason = NULL;
      gboolean ok = (*be)->available (&reason);
      g_variant_builder_add (&b, "{s(bs)}", (*be)->name, ok, ok ? "" : reason);
    }
  return g_variant_builder_end (&b);
}

void
vb_manager_export (VbDaemon *daemon)
{
  g_autoptr (VbDBusObjectSkeleton) object = vb_dbus_object_skeleton_new (VB_OBJECT_ROOT "/Manager");

  daemon->bus->manager = vb_dbus_manager_skeleton_new ();
  vb_dbus_manager_set_version (daemon->bus->manager, VB_VERSION);
  vb_dbus_manager_set_drivers (daemon->bus->manager, drivers_variant ());
  vb_dbus_manager_set_backends (daemon->bus->manager, backends_variant ());
  g_signal_connect (daemon->bus->manager, "handle-create-device", G_CALLBACK (handle_create_device),
                    daemon);
  g_signal_connect (daemon->bus->manager, "handle-apply", G_CALLBACK (vb_manager_handle_apply),
                    daemon);
  g_signal_connect (daemon->bus->manager, "handle-dump", G_CALLBACK (handle_dump), daemon);
  g_signal_connect (daemon->bus->manager, "handle-list-devices", G_CALLBACK (handle_list_devices),
                    daemon);
  g_signal_connect (daemon->bus->manager, "handle-scan", G_CALLBACK (handle_scan), daemon);
  g_signal_connect (daemon->bus->manager, "handle-wipe", G_CALLBACK (handle_wipe), daemon);
  vb_dbus_object_skeleton_set_manager (object, daemon->bus->manager);
  g_dbus_object_manager_server_export (daemon->bus->object_manager,
                                       G_DBUS_OBJECT_SKELETON (object));
}
