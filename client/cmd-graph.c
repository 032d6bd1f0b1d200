/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr graph: which devices are built on which. The graph is rebuilt here
 * from the Device objects (component sources "vblk:NAME" are the edges)
 * with the same pure VbGraph code vblkd uses, so both draw it alike. */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>

#include "vb-graph.h"
#include "vb-state.h"

/* A VbState holding what the graph needs: names and component sources. */
static VbState *
vb_mgr_state_from_devices (GDBusObjectManager *manager, GPtrArray *devices)
{
  VbState *state = vb_state_new ();

  for (guint i = 0; i < devices->len; i++)
    {
      VbDBusDevice *device = devices->pdata[i];
      const char *const *paths = vb_dbus_device_get_components (device);
      VbDeviceConfig *config;

      config = vb_device_config_new (
          vb_dbus_device_get_name (device), vb_dbus_device_get_uuid (device),
          vb_dbus_device_get_driver (device), vb_dbus_device_get_backend (device));
      for (gsize j = 0; paths != NULL && paths[j] != NULL; j++)
        {
          g_autoptr (VbDBusComponent) component = NULL;

          component = vb_mgr_lookup_component (manager, paths[j]);
          if (component == NULL)
            continue;
          g_ptr_array_add (config->components,
                           vb_component_config_new (vb_dbus_component_get_source (component),
                                                    vb_dbus_component_get_role (component), ""));
        }
      g_ptr_array_add (state->devices, config);
    }
  return state;
}

/* {"devices":["a","b"],"edges":[{"device":"b","component":"a"}]} */
static JsonNode *
vb_mgr_graph_to_json (const VbGraph *graph, GPtrArray *devices)
{
  g_autoptr (JsonBuilder) builder = json_builder_new ();

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "devices");
  json_builder_begin_array (builder);
  for (guint i = 0; i < devices->len; i++)
    json_builder_add_string_value (builder, vb_dbus_device_get_name (devices->pdata[i]));
  json_builder_end_array (builder);

  json_builder_set_member_name (builder, "edges");
  json_builder_begin_array (builder);
  for (guint i = 0; i < devices->len; i++)
    {
      const char *name = vb_dbus_device_get_name (devices->pdata[i]);
      g_auto (GStrv) components = vb_graph_components_of (graph, name);

      for (gsize j = 0; components != NULL && components[j] != NULL; j++)
        {
          json_builder_begin_object (builder);
          json_builder_set_member_name (builder, "device");
          json_builder_add_string_value (builder, name);
          json_builder_set_member_name (builder, "component");
          json_builder_add_string_value (builder, components[j]);
          json_builder_end_object (builder);
        }
    }
  json_builder_end_array (builder);
  json_builder_end_object (builder);
  return json_builder_get_root (builder);
}

int
vb_cmd_graph (int argc, char **argv)
{
  gboolean dot = FALSE;
  gboolean json = FALSE;
  const GOptionEntry entries[]
      = { { "dot", 0, 0, G_OPTION_ARG_NONE, &dot, N_ ("Print Graphviz dot"), NULL },
          { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print JSON"), NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (GPtrArray) devices = NULL;
  g_autoptr (VbState) state = NULL;
  g_autoptr (VbGraph) graph = NULL;

  if (!vb_mgr_parse_options ("graph", "", _ ("Show which devices are built on which."), entries,
                             &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc > 1)
    return vb_mgr_usage_error ("graph", _ ("unexpected argument '%s'"), argv[1]);
  if (dot && json)
    return vb_mgr_usage_error ("graph", _ ("--dot and --json exclude each other"));

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  devices = vb_mgr_list_devices (manager);
  state = vb_mgr_state_from_devices (manager, devices);
  graph = vb_graph_new (state);

  if (json)
    {
      g_autoptr (JsonNode) root = vb_mgr_graph_to_json (graph, devices);

      vb_mgr_print_json (root);
    }
  else
    {
      g_autofree char *text = dot ? vb_graph_to_dot (graph) : vb_graph_to_text (graph);

      g_print ("%s", text);
    }
  return VB_EXIT_OK;
}
