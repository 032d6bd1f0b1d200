/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr status, drivers and backends: the operator's summary views. status
 * says in one line per device whether it holds every copy it should, and
 * says it again in its exit status (as mdadm --detail --test); drivers and
 * backends print what vblkd offers (Manager.Drivers, Manager.Backends). */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>
#include <string.h>

#include "vb-util.h"

/* The health of one device, in increasing order of trouble. */
typedef enum {
  VB_HEALTH_OK,
  VB_HEALTH_DEGRADED,
  VB_HEALTH_FAILED,
} VbHealth;

static const char *const vb_health_names[] = { "ok", "degraded", "failed" };

typedef struct {
  char *name;
  char *state;
  VbHealth health;
  GPtrArray *problems; /* "SOURCE (ROLE) STATE", owned strings, NULL-terminated */
} VbStatusLine;

static void
vb_status_line_free (VbStatusLine *line)
{
  g_free (line->name);
  g_free (line->state);
  g_ptr_array_unref (line->problems);
  g_free (line);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbStatusLine, vb_status_line_free)

/* A device is failed when its data cannot be reached as it should (state
 * failed, or configuring — a component is not there to start it — while
 * it is marked to start at boot), degraded when a component is not a full
 * copy (faulty, missing, rebuilding; a spare that failed too; an
 * incomplete device not marked to start), ok otherwise: a stopped device
 * is not a fault. */
static VbStatusLine *
vb_status_of (GDBusObjectManager *manager, VbDBusDevice *device)
{
  VbStatusLine *line = g_new0 (VbStatusLine, 1);
  g_autoptr (GPtrArray) components = vb_mgr_collect_components (manager, device);
  const char *state = vb_mgr_str (vb_dbus_device_get_state (device));

  line->name = g_strdup (vb_mgr_str (vb_dbus_device_get_name (device)));
  line->state = g_strdup (state);
  line->problems = g_ptr_array_new_null_terminated (1, g_free, TRUE); /* (1: pdata never NULL) */
  for (guint i = 0; i < components->len; i++)
    {
      const VbMgrComponentView *c = components->pdata[i];
      const char *cstate = vb_mgr_str (c->state);

      if (strcmp (cstate, "in-sync") == 0 || strcmp (cstate, "spare") == 0)
        continue;
      g_ptr_array_add (line->problems, g_strdup_printf ("%s (%s) %s", vb_mgr_str (c->source),
                                                        vb_mgr_str (c->role), cstate));
    }
  /* (configuring: a component is not there; failed when the device is
   * meant to run, at boot and so now; a stopped one is only incomplete) */
  if (strcmp (state, "failed") == 0
      || (strcmp (state, "configuring") == 0 && vb_dbus_device_get_autostart (device)))
    line->health = VB_HEALTH_FAILED;
  else if (strcmp (state, "degraded") == 0 || line->problems->len > 0)
    line->health = VB_HEALTH_DEGRADED;
  else
    line->health = VB_HEALTH_OK;
  return line;
}

static void
vb_status_to_json (JsonBuilder *b, VbStatusLine *line)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, line->name);
  json_builder_set_member_name (b, "state");
  json_builder_add_string_value (b, line->state);
  json_builder_set_member_name (b, "health");
  json_builder_add_string_value (b, vb_health_names[line->health]);
  json_builder_set_member_name (b, "problems");
  json_builder_begin_array (b);
  for (guint i = 0; i < line->problems->len; i++)
    json_builder_add_string_value (b, line->problems->pdata[i]);
  json_builder_end_array (b);
  json_builder_end_object (b);
}

int
vb_cmd_status (int argc, char **argv)
{
  gboolean json = FALSE;
  const GOptionEntry entries[]
      = { { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print a JSON array"), NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (GPtrArray) devices = NULL;
  g_autoptr (GPtrArray) lines = NULL;
  g_autoptr (JsonBuilder) b = json_builder_new ();
  VbHealth worst = VB_HEALTH_OK;

  if (!vb_mgr_parse_options (
          "status", "[NAME...] [--json]",
          _ ("Say whether each device (or each one named) holds every copy it should, one line "
             "each: NAME STATE HEALTH and the components that are not in sync. HEALTH is ok, "
             "degraded (a component is faulty, missing or being rebuilt) or failed (the data "
             "cannot be reached: state failed, or configuring while a component is not there "
             "and the device is marked to start at boot). "
             "Exit status: 0 every device ok (a stopped device is ok), 3 one or more degraded "
             "and none failed, 4 one or more failed, 1 vblkd unreachable or a NAME unknown, 2 "
             "bad usage."),
          entries, &argc, &argv))
    return VB_EXIT_USAGE;
  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  if (argc > 1)
    {
      devices = g_ptr_array_new_with_free_func (g_object_unref);
      for (int i = 1; i < argc; i++)
        {
          VbDBusDevice *device = vb_mgr_lookup_device (manager, "status", argv[i]);
          if (device == NULL)
            return VB_EXIT_FAILED;
          g_ptr_array_add (devices, device);
        }
    }
  else
    devices = vb_mgr_list_devices (manager);
  lines = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_status_line_free);
  for (guint i = 0; i < devices->len; i++)
    {
      VbStatusLine *line = vb_status_of (manager, devices->pdata[i]);
      worst = MAX (worst, line->health);
      g_ptr_array_add (lines, line);
    }
  if (json)
    {
      g_autoptr (JsonNode) root = NULL;
      json_builder_begin_array (b);
      for (guint i = 0; i < lines->len; i++)
        vb_status_to_json (b, lines->pdata[i]);
      json_builder_end_array (b);
      root = json_builder_get_root (b);
      vb_mgr_print_json (root);
    }
  else
    {
      g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
      for (guint i = 0; i < lines->len; i++)
        {
          VbStatusLine *line = lines->pdata[i];
          g_autofree char *problems = g_strjoinv (", ", (char **) line->problems->pdata);
          g_ptr_array_add (rows, vb_mgr_row (line->name, line->state, vb_health_names[line->health],
                                             problems, NULL));
        }
      vb_mgr_print_table (rows, 4, "");
    }
  switch (worst)
    {
    case VB_HEALTH_FAILED:
      return VB_EXIT_STATUS_FAILED;
    case VB_HEALTH_DEGRADED:
      return VB_EXIT_STATUS_DEGRADED;
    default:
      return VB_EXIT_OK;
    }
}

/* drivers and backends: "--json" and no argument, then the Manager
 * interface (which holds what they print); NULL with *status set when
 * not. */
static VbDBusManager *
vb_mgr_manager_view (const char *command, const char *summary, gboolean *json, int argc,
                     char **argv, GDBusObjectManager **manager, int *status)
{
  const GOptionEntry entries[]
      = { { "json", 0, 0, G_OPTION_ARG_NONE, json, N_ ("Print a JSON object"), NULL },
          G_OPTION_ENTRY_NULL };
  VbDBusManager *iface;

  *status = VB_EXIT_USAGE;
  if (!vb_mgr_parse_options (command, "[--json]", summary, entries, &argc, &argv))
    return NULL;
  if (argc > 1)
    {
      vb_mgr_usage_error (command, _ ("unexpected argument '%s'"), argv[1]);
      return NULL;
    }
  *status = VB_EXIT_FAILED;
  *manager = vb_mgr_connect ();
  if (*manager == NULL)
    return NULL;
  iface = vb_mgr_get_manager (*manager, command, NULL);
  if (iface != NULL)
    *status = VB_EXIT_OK;
  return iface;
}

/* The JSON object @b holds, ended and printed. */
static void
vb_mgr_print_json_object (JsonBuilder *b)
{
  g_autoptr (JsonNode) root = NULL;

  json_builder_end_object (b);
  root = json_builder_get_root (b);
  vb_mgr_print_json (root);
}

/* vbmgr drivers: each driver and its attributes (type, default, whether
 * it may change while the device runs). */
int
vb_cmd_drivers (int argc, char **argv)
{
  gboolean json = FALSE;
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusManager) iface = NULL;
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  g_autoptr (JsonBuilder) b = json_builder_new ();
  GVariant *drivers;
  GVariantIter iter;
  const char *name;
  int status;

  iface = vb_mgr_manager_view ("drivers",
                               _ ("List the drivers vblkd offers and their attributes: type, "
                                  "default, and whether it may change while the device runs "
                                  "(vbmgr set)."),
                               &json, argc, argv, &manager, &status);
  if (iface == NULL)
    return status;
  drivers = vb_dbus_manager_get_drivers (iface);
  if (drivers == NULL)
    {
      if (json)
        g_print ("{}\n");
      return VB_EXIT_OK;
    }
  g_variant_iter_init (&iter, drivers);
  while (g_variant_iter_next (&iter, "{&s@a(sssb)}", &name, NULL))
    g_ptr_array_add (names, (gpointer) name);
  g_ptr_array_sort (names, vb_compare_string_pointers);
  if (json)
    json_builder_begin_object (b);
  for (guint i = 0; i < names->len; i++)
    {
      g_autoptr (GVariant) attrs
          = g_variant_lookup_value (drivers, names->pdata[i], G_VARIANT_TYPE ("a(sssb)"));
      g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
      GVariantIter ai;
      const char *attr, *type, *def;
      gboolean online;

      if (json)
        {
          json_builder_set_member_name (b, names->pdata[i]);
          json_builder_begin_array (b);
        }
      else
        {
          g_print ("%s\n", (const char *) names->pdata[i]);
          g_ptr_array_add (rows, vb_mgr_row (_ ("ATTRIBUTE"), _ ("TYPE"), _ ("DEFAULT"),
                                             _ ("WHILE RUNNING"), NULL));
        }
      g_variant_iter_init (&ai, attrs);
      while (g_variant_iter_next (&ai, "(&s&s&sb)", &attr, &type, &def, &online))
        if (json)
          {
            json_builder_begin_object (b);
            json_builder_set_member_name (b, "name");
            json_builder_add_string_value (b, attr);
            json_builder_set_member_name (b, "type");
            json_builder_add_string_value (b, type);
            json_builder_set_member_name (b, "default");
            json_builder_add_string_value (b, def);
            json_builder_set_member_name (b, "changeable-while-started");
            json_builder_add_boolean_value (b, online);
            json_builder_end_object (b);
          }
        else
          g_ptr_array_add (rows, vb_mgr_row (attr, type, vb_mgr_or_dash (def),
                                             online ? _ ("changeable") : _ ("fixed"), NULL));
      if (json)
        json_builder_end_array (b);
      else if (rows->len == 1)
        g_print ("  %s\n", _ ("(no attributes)"));
      else
        vb_mgr_print_table (rows, 4, "  ");
    }
  if (json)
    vb_mgr_print_json_object (b);
  return VB_EXIT_OK;
}

/* vbmgr backends: each backend, available or the reason it is not. */
int
vb_cmd_backends (int argc, char **argv)
{
  gboolean json = FALSE;
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusManager) iface = NULL;
  g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  GVariant *backends;
  GVariantIter iter;
  const char *name, *reason;
  gboolean available;
  int status;

  iface = vb_mgr_manager_view ("backends",
                               _ ("List the backends (how a started device becomes a block "
                                  "node): available, or why not on this machine."),
                               &json, argc, argv, &manager, &status);
  if (iface == NULL)
    return status;
  backends = vb_dbus_manager_get_backends (iface);
  if (json)
    json_builder_begin_object (b);
  else
    g_ptr_array_add (rows, vb_mgr_row (_ ("BACKEND"), _ ("AVAILABLE"), _ ("WHY NOT"), NULL));
  if (backends != NULL)
    {
      g_variant_iter_init (&iter, backends);
      while (g_variant_iter_next (&iter, "{&s(b&s)}", &name, &available, &reason))
        if (json)
          {
            json_builder_set_member_name (b, name);
            json_builder_begin_object (b);
            json_builder_set_member_name (b, "available");
            json_builder_add_boolean_value (b, available);
            json_builder_set_member_name (b, "reason");
            json_builder_add_string_value (b, available ? "" : reason);
            json_builder_end_object (b);
          }
        else
          g_ptr_array_add (rows, vb_mgr_row (name, available ? _ ("yes") : _ ("no"),
                                             available ? "-" : vb_mgr_or_dash (reason), NULL));
    }
  if (json)
    vb_mgr_print_json_object (b);
  else
    vb_mgr_print_table (rows, 3, "");
  return VB_EXIT_OK;
}
