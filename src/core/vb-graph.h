/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dependency graph between devices: a device depends on every device it
 * uses as a component (source "vblk:NAME"). Built from a VbState; pure. */
#pragma once

#include <glib.h>
#include <string.h>

#include "vb-state.h"

G_BEGIN_DECLS

/* A component that is another device: "vblk:NAME" */
#define VB_DEVICE_SOURCE_PREFIX "vblk:"

/* NAME of a source "vblk:NAME", or NULL: the first letter tells most
 * sources apart (paths), for the passes over thousands of devices */
static inline const char *
vb_device_source_name (const char *source)
{
  if (source[0] != VB_DEVICE_SOURCE_PREFIX[0]
      || strncmp (source, VB_DEVICE_SOURCE_PREFIX, sizeof VB_DEVICE_SOURCE_PREFIX - 1) != 0)
    return NULL;
  return source + sizeof VB_DEVICE_SOURCE_PREFIX - 1;
}

typedef struct _VbGraph VbGraph;

/* Edges from every component source "vblk:NAME" (other sources ignored).
 * An edge to a name not in @state is kept (it is a missing dependency;
 * vb_graph_check reports it). */
VbGraph *vb_graph_new (const VbState *state);
/* The graph of device @name and of the devices it is built on, down to
 * its disks: what a check of @name alone needs (a cycle through it is
 * among them; a vblk:NAME it names that does not exist too), not a graph
 * of the thousands beside. */
VbGraph *vb_graph_new_below (const VbState *state, const char *name);
/* The graph of device @name and of every device built on it: its stop
 * order, from one pass that reads each device's sources alone. */
VbGraph *vb_graph_new_above (const VbState *state, const char *name);
void vb_graph_free (VbGraph *graph);

/* Fails with VB_ERROR_DEPENDENCY_CYCLE naming one cycle as
 * "a -> b -> a", or VB_ERROR_NOT_FOUND naming "device 'x' uses vblk:y,
 * which does not exist". */
gboolean vb_graph_check (const VbGraph *graph, GError **error);

/* Direct neighbours, sorted by name; NULL-terminated, caller frees with
 * g_strfreev. components_of: the devices @name is built from;
 * dependents_of: the devices built on @name. */
char **vb_graph_components_of (const VbGraph *graph, const char *name);
char **vb_graph_dependents_of (const VbGraph *graph, const char *name);

/* Start order for @name: every device it transitively depends on, then
 * @name itself (dependencies first; ties by name). */
char **vb_graph_start_order (const VbGraph *graph, const char *name);
/* Stop order for @name: every device transitively built on it, then @name
 * (dependents first; ties by name). Also the delete order. */
char **vb_graph_stop_order (const VbGraph *graph, const char *name);

/* Human text: one line per device in start order, dependencies indented
 * under their dependents, like a tree ("data\n  └─ disk0\n"). */
char *vb_graph_to_text (const VbGraph *graph);
/* Graphviz: digraph vblk { "a" -> "b"; ... } with every node listed. */
char *vb_graph_to_dot (const VbGraph *graph);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbGraph, vb_graph_free)

G_END_DECLS
