/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The list of backends and the choice "auto" makes. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "backend.h"
#include "vb-error.h"

#include <gio/gio.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>
#include <sys/sysmacros.h>

extern const VbBackend vb_backend_kernel;
extern const VbBackend vb_backend_loop;
extern const VbBackend vb_backend_nbd;
extern const VbBackend vb_backend_ublk;

/* "auto" takes the first that is available and runs the driver: the
 * kernel's own devices where it has them, then the engine on ublk
 * (io_uring, no socket), on the kernel nbd client (a socket per
 * connection), then loop (a loop device for a driver with one extent; for
 * the engine, loop over FUSE: two kernel crossings per request) */
static const VbBackend *const built_in[] = {
  &vb_backend_kernel,
  &vb_backend_ublk,
  &vb_backend_nbd,
  &vb_backend_loop,
};

static GMutex registry_lock;
/* const VbBackend*, NULL-terminated; registered at start-up only (before
 * any worker thread), so that vb_backends()'s array stays put */
static GPtrArray *registry;
static GError *built_in_refused; /* the first built-in backend refused */

static char *run_dir;
static VbBackendFailureFunc failure_func;
static gpointer failure_data;
static VbBackendJobFunc job_func;

#define REQUIRE(from, member, why)                                                                 \
  if ((from)->member == NULL)                                                                      \
  return refuse (backend, #member, why, error)

static gboolean
refuse (const VbBackend *backend, const char *member, const char *why, GError **error)
{
  g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("backend '%s': no %s (%s)"),
               backend->name ? backend->name : "(no name)", member, why);
  return FALSE;
}

gboolean
vb_backend_check (const VbBackend *backend, GError **error)
{
  VbBackendCapabilities caps = backend->capabilities;
  const VbEngineDeviceOps *ops = backend->engine;

  REQUIRE (backend, name, "every backend has one");
  REQUIRE (backend, available, "required");
  REQUIRE (backend, supports, "required");
  REQUIRE (backend, start, "required");
  REQUIRE (backend, stop, "required");
  REQUIRE (backend, update, "required");
  REQUIRE (backend, scan, "required");
  REQUIRE (backend, node_owner, "required");
  if (caps & VB_BACKEND_CAN_FORMAT)
    REQUIRE (backend, format, "it declares VB_BACKEND_CAN_FORMAT");
  if (caps & VB_BACKEND_CAN_RECONFIGURE)
    REQUIRE (backend, reconfigure, "it declares VB_BACKEND_CAN_RECONFIGURE");
  if (caps & VB_BACKEND_SERVES_ENGINE)
    REQUIRE (backend, engine, "it declares VB_BACKEND_SERVES_ENGINE");
  if (ops == NULL)
    return TRUE;
  REQUIRE (ops, component_status, "engine device ops are all required");
  REQUIRE (ops, slot_source, "engine device ops are all required");
  REQUIRE (ops, component_missing, "engine device ops are all required");
  REQUIRE (ops, lost_data, "engine device ops are all required");
  REQUIRE (ops, set_faulty, "engine device ops are all required");
  REQUIRE (ops, release, "engine device ops are all required");
  REQUIRE (ops, block_ops, "engine device ops are all required");
  REQUIRE (ops, check, "engine device ops are all required");
  REQUIRE (ops, cancel_job, "engine device ops are all required");
  REQUIRE (ops, readd, "engine device ops are all required");
  REQUIRE (ops, set_spares, "engine device ops are all required");
  REQUIRE (ops, needs_server, "engine device ops are all required");
  REQUIRE (ops, settle, "engine device ops are all required");
  return TRUE;
}

#undef REQUIRE

static gboolean
register_locked (const VbBackend *backend, GError **error)
{
  if (!vb_backend_check (backend, error))
    return FALSE;
  for (guint i = 0; i + 1 < registry->len; i++)
    if (strcmp (((const VbBackend *) registry->pdata[i])->name, backend->name) == 0)
      {
        g_set_error (error, VB_ERROR, VB_ERROR_ALREADY_EXISTS,
                     _ ("backend '%s': registered already"), backend->name);
        return FALSE;
      }
  registry->pdata[registry->len - 1] = (gpointer) backend;
  g_ptr_array_add (registry, NULL);
  return TRUE;
}

/* The registry, with the built-in backends that pass the check. */
static void
registry_ensure_locked (void)
{
  if (registry)
    return;
  registry = g_ptr_array_new ();
  g_ptr_array_add (registry, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (built_in); i++)
    register_locked (built_in[i], built_in_refused ? NULL : &built_in_refused);
}

gboolean
vb_backends_register (const VbBackend *backend, GError **error)
{
  gboolean ok;

  g_return_val_if_fail (backend != NULL, FALSE);
  g_mutex_lock (&registry_lock);
  registry_ensure_locked ();
  ok = register_locked (backend, error);
  g_mutex_unlock (&registry_lock);
  return ok;
}

gboolean
vb_backends_init (const char *dir, VbBackendFailureFunc on_failure, VbBackendJobFunc on_job,
                  gpointer user_data, GError **error)
{
  g_free (run_dir);
  run_dir = g_strdup (dir);
  failure_func = on_failure;
  job_func = on_job;
  failure_data = user_data;
  g_mutex_lock (&registry_lock);
  registry_ensure_locked ();
  g_mutex_unlock (&registry_lock);
  if (built_in_refused == NULL)
    return TRUE;
  g_propagate_error (error, g_error_copy (built_in_refused));
  return FALSE;
}

gboolean
vb_backend_errno (int res, GError **error)
{
  if (res >= 0)
    return TRUE;
  g_set_error_literal (error, G_IO_ERROR, g_io_error_from_errno (-res), g_strerror (-res));
  return FALSE;
}

const char *
vb_backends_run_dir (void)
{
  return run_dir ? run_dir : VB_DEFAULT_RUN_DIR;
}

void
vb_backends_report_job (const char *uuid, const VbEngineJob *job)
{
  if (job_func)
    job_func (uuid, job, failure_data);
}

void
vb_backends_report_failure (const char *uuid, guint component, int error)
{
  if (failure_func)
    failure_func (uuid, component, error, failure_data);
}

void
vb_backend_instance_free (VbBackendInstance *instance)
{
  if (instance == NULL)
    return;
  g_free (instance->uuid);
  g_free (instance->block_device);
  g_free (instance->backing);
  g_free (instance);
}

const VbBackend *const *
vb_backends (void)
{
  const VbBackend *const *all;

  g_mutex_lock (&registry_lock);
  registry_ensure_locked ();
  all = (const VbBackend *const *) registry->pdata;
  g_mutex_unlock (&registry_lock);
  return all;
}

const VbBackend *
vb_backend_lookup (const char *name)
{
  const VbBackend *const *all_backends = vb_backends ();

  for (guint i = 0; all_backends[i]; i++)
    if (strcmp (all_backends[i]->name, name) == 0)
      return all_backends[i];
  return NULL;
}

char *
vb_backends_known_names (void)
{
  const VbBackend *const *all_backends = vb_backends ();
  GString *s = g_string_new ("auto");

  for (guint i = 0; all_backends[i]; i++)
    g_string_append_printf (s, ", %s", all_backends[i]->name);
  return g_string_free (s, FALSE);
}

const VbBackend *
vb_backend_choose (const char *requested, const VbDriver *driver, GHashTable *attributes,
                   char **why, GError **error)
{
  const VbBackend *const *all_backends = vb_backends ();
  const VbBackend *backend;
  g_autofree char *reason = NULL;

  if (strcmp (requested, "auto") == 0)
    {
      g_autoptr (GString) reasons = g_string_new (NULL);
      for (guint i = 0; all_backends[i]; i++)
        {
          g_autofree char *not_here = NULL;
          if (!all_backends[i]->available (&not_here)
              || !all_backends[i]->supports (driver, attributes, &not_here))
            {
              g_string_append_printf (reasons, "%s%s: %s", reasons->len ? "; " : "",
                                      all_backends[i]->name, not_here);
              continue;
            }
          if (why)
            *why = reasons->len
                       ? g_strdup_printf ("auto: the first that runs driver '%s' here; "
                                          "passed over %s",
                                          driver->name, reasons->str)
                       : g_strdup_printf ("auto: the first that runs driver '%s'", driver->name);
          return all_backends[i];
        }
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("backend: none can run driver '%s' here (%s)"), driver->name, reasons->str);
      return NULL;
    }
  backend = vb_backend_lookup (requested);
  if (backend == NULL)
    {
      g_autofree char *known = vb_backends_known_names ();
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("backend '%s': unknown (known: %s)"), requested, known);
      return NULL;
    }
  if (!backend->supports (driver, attributes, &reason))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("backend '%s': cannot run driver '%s': %s"), backend->name, driver->name,
                   reason);
      return NULL;
    }
  if (why)
    *why = g_strdup ("requested");
  return backend;
}

void
vb_node_owner_clear (VbNodeOwner *owner)
{
  g_clear_pointer (&owner->instance, g_free);
  g_clear_pointer (&owner->uuid, g_free);
  owner->backend = NULL;
  owner->internal = FALSE;
}

gboolean
vb_node_owner_is (const VbNodeOwner *owner, const char *instance, const char *uuid)
{
  const char *p = owner->uuid, *q = uuid;

  if (g_strcmp0 (owner->instance, instance) != 0 || p == NULL || *p == '\0')
    return FALSE;
  /* hex digits compared, dashes skipped: md names carry a prefix of them */
  while (*p && *q)
    {
      if (*p == '-')
        p++;
      else if (*q == '-')
        q++;
      else if (g_ascii_tolower (*p++) != g_ascii_tolower (*q++))
        return FALSE;
    }
  return *p == '\0';
}

/* The whole disk of partition @devnum, or @devnum itself. */
static dev_t
whole_disk_of (dev_t devnum)
{
  g_autofree char *part
      = g_strdup_printf ("/sys/dev/block/%u:%u/partition", major (devnum), minor (devnum));
  g_autofree char *link = NULL, *resolved = NULL, *parent_dev = NULL, *text = NULL;
  guint maj, min;

  if (!g_file_test (part, G_FILE_TEST_EXISTS))
    return devnum;
  link = g_strdup_printf ("/sys/dev/block/%u:%u", major (devnum), minor (devnum));
  resolved = realpath (link, NULL);
  if (resolved == NULL)
    return devnum;
  parent_dev = g_build_filename (resolved, "..", "dev", NULL);
  if (!g_file_get_contents (parent_dev, &text, NULL, NULL)
      || sscanf (text, "%u:%u", &maj, &min) != 2)
    return devnum;
  return makedev (maj, min);
}

gboolean
vb_backends_node_owner (dev_t devnum, VbNodeOwner *owner)
{
  const VbBackend *const *all_backends = vb_backends ();
  dev_t disk = whole_disk_of (devnum);

  for (guint i = 0; all_backends[i]; i++)
    if (all_backends[i]->node_owner (disk, owner))
      {
        owner->backend = all_backends[i]->name;
        return TRUE;
      }
  return FALSE;
}

gboolean
vb_node_owner_parse_tag (const char *tag, VbNodeOwner *owner)
{
  g_auto (GStrv) parts = NULL;

  if (tag == NULL || !g_str_has_prefix (tag, "vblk:"))
    return FALSE;
  parts = g_strsplit (tag + 5, ":", 3);
  if (parts[0] == NULL || parts[1] == NULL || *parts[0] == '\0' || *parts[1] == '\0')
    return FALSE;
  owner->instance = g_strdup (parts[0]);
  owner->uuid = g_strdup (parts[1]);
  owner->internal = parts[2] != NULL && strcmp (parts[2], "dm") == 0;
  return TRUE;
}
