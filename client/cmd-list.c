/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr list and show: read-only views of the devices, from the properties
 * vblkd exports through its ObjectManager and (the list's table) its
 * ListDevices, neither needing authorization, as tables and key: value
 * lines or as JSON. */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>
#include <string.h>

static gint
vb_mgr_compare_strings (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(const char *const *) a, *(const char *const *) b);
}

/* Names of the devices built on @device, sorted. */
static GPtrArray *
vb_mgr_collect_dependents (GDBusObjectManager *manager, VbDBusDevice *device)
{
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);
  const char *const *paths = vb_dbus_device_get_dependents (device);

  for (gsize i = 0; paths != NULL && paths[i] != NULL; i++)
    g_ptr_array_add (names, vb_mgr_device_name_from_path (manager, paths[i]));
  g_ptr_array_sort (names, vb_mgr_compare_strings);
  return names;
}

static gint
vb_mgr_compare_pairs (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 ((*(char **const *) a)[0], (*(char **const *) b)[0]);
}

/* The attributes as [key, value] pairs sorted by key. Copies, because
 * strings borrowed from a GVariant in tree form die when it serialises. */
static GPtrArray *
vb_mgr_sorted_attributes (GVariant *attributes)
{
  GPtrArray *pairs = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  GVariantIter iter;
  char *key;
  char *value;

  if (attributes == NULL)
    return pairs;
  g_variant_iter_init (&iter, attributes);
  while (g_variant_iter_next (&iter, "{ss}", &key, &value))
    {
      char **pair = g_new0 (char *, 3);

      pair[0] = key;
      pair[1] = value;
      g_ptr_array_add (pairs, pair);
    }
  g_ptr_array_sort (pairs, vb_mgr_compare_pairs);
  return pairs;
}

static void
vb_mgr_device_to_json (JsonBuilder *builder, GDBusObjectManager *manager, VbDBusDevice *device)
{
  g_autoptr (GPtrArray) attributes
      = vb_mgr_sorted_attributes (vb_dbus_device_get_attributes (device));
  g_autoptr (GPtrArray) components = vb_mgr_collect_components (manager, device);
  g_autoptr (GPtrArray) dependents = vb_mgr_collect_dependents (manager, device);

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "name");
  json_builder_add_string_value (builder, vb_mgr_str (vb_dbus_device_get_name (device)));
  json_builder_set_member_name (builder, "uuid");
  json_builder_add_string_value (builder, vb_mgr_str (vb_dbus_device_get_uuid (device)));
  json_builder_set_member_name (builder, "driver");
  json_builder_add_string_value (builder, vb_mgr_str (vb_dbus_device_get_driver (device)));
  json_builder_set_member_name (builder, "backend");
  json_builder_add_string_value (builder, vb_mgr_str (vb_dbus_device_get_backend (device)));
  json_builder_set_member_name (builder, "state");
  json_builder_add_string_value (builder, vb_mgr_str (vb_dbus_device_get_state (device)));
  json_builder_set_member_name (builder, "block_device");
  json_builder_add_string_value (builder, vb_mgr_str (vb_dbus_device_get_block_device (device)));
  json_builder_set_member_name (builder, "size");
  json_builder_add_int_value (builder, (gint64) vb_dbus_device_get_size (device));
  json_builder_set_member_name (builder, "autostart");
  json_builder_add_boolean_value (builder, vb_dbus_device_get_autostart (device));
  json_builder_set_member_name (builder, "previous_configuration");
  json_builder_add_string_value (builder,
                                 vb_mgr_str (vb_dbus_device_get_previous_configuration (device)));
  json_builder_set_member_name (builder, "exports");
  json_builder_begin_array (builder);
  for (const char *const *x = vb_dbus_device_get_exports (device); x && *x; x++)
    json_builder_add_string_value (builder, *x);
  json_builder_end_array (builder);

  json_builder_set_member_name (builder, "attributes");
  json_builder_begin_object (builder);
  for (guint i = 0; i < attributes->len; i++)
    {
      char **pair = attributes->pdata[i];

      json_builder_set_member_name (builder, pair[0]);
      json_builder_add_string_value (builder, pair[1]);
    }
  json_builder_end_object (builder);

  json_builder_set_member_name (builder, "components");
  json_builder_begin_array (builder);
  for (guint i = 0; i < components->len; i++)
    {
      VbMgrComponentView *view = components->pdata[i];

      json_builder_begin_object (builder);
      json_builder_set_member_name (builder, "index");
      json_builder_add_int_value (builder, (gint64) view->index);
      json_builder_set_member_name (builder, "source");
      json_builder_add_string_value (builder, vb_mgr_str (view->source));
      json_builder_set_member_name (builder, "role");
      json_builder_add_string_value (builder, vb_mgr_str (view->role));
      json_builder_set_member_name (builder, "state");
      json_builder_add_string_value (builder, vb_mgr_str (view->state));
      json_builder_set_member_name (builder, "errors");
      json_builder_add_int_value (builder, (gint64) view->errors);
      json_builder_end_object (builder);
    }
  json_builder_end_array (builder);

  json_builder_set_member_name (builder, "dependents");
  json_builder_begin_array (builder);
  for (guint i = 0; i < dependents->len; i++)
    json_builder_add_string_value (builder, dependents->pdata[i]);
  json_builder_end_array (builder);
  json_builder_end_object (builder);
}

static char **
vb_mgr_device_row (GDBusObjectManager *manager, VbDBusDevice *device)
{
  g_autofree char *size
      = g_format_size_full (vb_dbus_device_get_size (device), G_FORMAT_SIZE_IEC_UNITS);

  return vb_mgr_row (vb_mgr_or_dash (vb_dbus_device_get_name (device)),
                     vb_mgr_or_dash (vb_dbus_device_get_driver (device)),
                     vb_mgr_or_dash (vb_dbus_device_get_backend (device)),
                     vb_mgr_or_dash (vb_dbus_device_get_state (device)), size,
                     vb_mgr_or_dash (vb_dbus_device_get_block_device (device)), NULL);
}

static gint
compare_rows (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 ((*(char **const *) a)[0], (*(char **const *) b)[0]);
}

/* The table, from Manager.ListDevices: the columns alone, not every
 * property of 20,000 objects (GetManagedObjects was most of a list's
 * time at 10,000 devices) */
static int
list_table (const char *const *header)
{
  g_autoptr (GVariant) devices = vb_mgr_read (
      "list", VB_OBJECT_ROOT "/Manager", VB_BUS_NAME ".Manager", "ListDevices",
      g_variant_new ("(@a{sv})", g_variant_new_array (G_VARIANT_TYPE ("{sv}"), NULL, 0)),
      G_VARIANT_TYPE ("(a(sssstso))"));
  g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  char **head = g_new0 (char *, g_strv_length ((char **) header) + 1);
  const char *name, *driver, *backend, *state, *node;
  guint64 bytes;
  GVariantIter iter;

  if (devices == NULL)
    {
      g_free (head);
      return VB_EXIT_FAILED;
    }
  g_variant_iter_init (&iter, devices);
  while (g_variant_iter_next (&iter, "(&s&s&s&st&s&o)", &name, &driver, &backend, &state, &bytes,
                              &node, NULL))
    {
      g_autofree char *size = g_format_size_full (bytes, G_FORMAT_SIZE_IEC_UNITS);
      g_ptr_array_add (rows, vb_mgr_row (vb_mgr_or_dash (name), vb_mgr_or_dash (driver),
                                         vb_mgr_or_dash (backend), vb_mgr_or_dash (state), size,
                                         vb_mgr_or_dash (node), NULL));
    }
  g_ptr_array_sort (rows, compare_rows);
  for (guint c = 0; header[c]; c++)
    head[c] = g_strdup (_ (header[c]));
  g_ptr_array_insert (rows, 0, head);
  vb_mgr_print_table (rows, g_strv_length (head), "");
  return VB_EXIT_OK;
}

int
vb_cmd_list (int argc, char **argv)
{
  static const char *const header[] = {
    N_ ("NAME"), N_ ("DRIVER"),       N_ ("BACKEND"), N_ ("STATE"),
    N_ ("SIZE"), N_ ("BLOCK-DEVICE"), NULL,
  };
  static const VbMgrListing listing = {
    .command = "list",
    .summary = N_ ("List the devices."),
    .header = header,
    .collect = vb_mgr_list_devices,
    .row = (char **(*) (GDBusObjectManager *, gpointer)) vb_mgr_device_row,
    .to_json = (VbMgrToJsonFunc) vb_mgr_device_to_json,
  };

  /* the table: from ListDevices (--json and a usage error: below) */
  if (argc == 1)
    return list_table (header);
  return vb_mgr_run_listing (&listing, argc, argv);
}

static void
vb_mgr_print_device (GDBusObjectManager *manager, VbDBusDevice *device)
{
  g_autoptr (GPtrArray) attributes
      = vb_mgr_sorted_attributes (vb_dbus_device_get_attributes (device));
  g_autoptr (GPtrArray) components = vb_mgr_collect_components (manager, device);
  g_autoptr (GPtrArray) dependents = vb_mgr_collect_dependents (manager, device);
  g_autoptr (GString) line = g_string_new (NULL);
  g_autofree char *size = g_format_size_full (vb_dbus_device_get_size (device),
                                              G_FORMAT_SIZE_IEC_UNITS | G_FORMAT_SIZE_LONG_FORMAT);

  /* "Key: value" with one space, so that scripts can grep "State: active". */
  g_print ("%s: %s\n", _ ("Name"), vb_mgr_or_dash (vb_dbus_device_get_name (device)));
  g_print ("%s: %s\n", _ ("UUID"), vb_mgr_or_dash (vb_dbus_device_get_uuid (device)));
  g_print ("%s: %s\n", _ ("Driver"), vb_mgr_or_dash (vb_dbus_device_get_driver (device)));
  /* both configurations while the rebuild a reconfiguration began runs */
  if (vb_mgr_str (vb_dbus_device_get_previous_configuration (device))[0])
    g_print ("%s: %s -> %s (%s)\n", _ ("Reconfigured"),
             vb_dbus_device_get_previous_configuration (device),
             vb_mgr_or_dash (vb_dbus_device_get_driver (device)), _ ("rebuild running"));
  g_print ("%s: %s\n", _ ("Backend"), vb_mgr_or_dash (vb_dbus_device_get_backend (device)));
  if (vb_mgr_str (vb_dbus_device_get_backend_reason (device))[0])
    g_print ("%s: %s\n", _ ("Backend reason"), vb_dbus_device_get_backend_reason (device));
  g_print ("%s: %s\n", _ ("State"), vb_mgr_or_dash (vb_dbus_device_get_state (device)));
  g_print ("%s: %s\n", _ ("Block device"),
           vb_mgr_or_dash (vb_dbus_device_get_block_device (device)));
  g_print ("%s: %s\n", _ ("Size"), size);
  g_print ("%s: %s\n", _ ("Autostart"),
           vb_dbus_device_get_autostart (device) ? _ ("yes") : _ ("no"));
  for (const char *const *x = vb_dbus_device_get_exports (device); x && *x; x++)
    g_print ("%s: %s\n", _ ("Export"), *x);

  for (guint i = 0; i < attributes->len; i++)
    {
      char **pair = attributes->pdata[i];

      g_string_append_printf (line, "%s%s=%s", i > 0 ? " " : "", pair[0], pair[1]);
    }
  g_print ("%s: %s\n", _ ("Attributes"), vb_mgr_or_dash (line->str));

  g_print ("%s:\n", _ ("Components"));
  if (components->len > 0)
    {
      g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);

      g_ptr_array_add (rows, vb_mgr_row (_ ("INDEX"), _ ("ROLE"), _ ("STATE"), _ ("ERRORS"),
                                         _ ("SOURCE"), NULL));
      for (guint i = 0; i < components->len; i++)
        {
          VbMgrComponentView *view = components->pdata[i];
          g_autofree char *index = g_strdup_printf ("%" G_GUINT64_FORMAT, view->index);
          g_autofree char *errors = g_strdup_printf ("%" G_GUINT64_FORMAT, view->errors);

          g_ptr_array_add (rows, vb_mgr_row (index, vb_mgr_or_dash (view->role),
                                             vb_mgr_or_dash (view->state), errors,
                                             vb_mgr_or_dash (view->source), NULL));
        }
      vb_mgr_print_table (rows, 5, "  ");
    }

  g_string_truncate (line, 0);
  for (guint i = 0; i < dependents->len; i++)
    g_string_append_printf (line, "%s%s", i > 0 ? ", " : "", (const char *) dependents->pdata[i]);
  g_print ("%s: %s\n", _ ("Dependents"), vb_mgr_or_dash (line->str));
}

int
vb_cmd_show (int argc, char **argv)
{
  gboolean json = FALSE;
  const GOptionEntry entries[]
      = { { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print JSON"), NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (VbDBusDevice) device = NULL;

  if (!vb_mgr_parse_options ("show", "NAME", _ ("Show one device."), entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc < 2)
    return vb_mgr_usage_error ("show", _ ("missing device name"));
  if (argc > 2)
    return vb_mgr_usage_error ("show", _ ("unexpected argument '%s'"), argv[2]);

  /* the device's object and its components' alone (not every object:
   * the scale asks for it) */
  device = vb_mgr_get_device ("show", argv[1]);
  if (device == NULL)
    return VB_EXIT_FAILED;

  if (json)
    {
      g_autoptr (JsonBuilder) builder = json_builder_new ();
      g_autoptr (JsonNode) root = NULL;

      vb_mgr_device_to_json (builder, NULL, device);
      root = json_builder_get_root (builder);
      vb_mgr_print_json (root);
    }
  else
    vb_mgr_print_device (NULL, device);
  return VB_EXIT_OK;
}
