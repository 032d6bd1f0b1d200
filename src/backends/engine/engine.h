/* The engine: vblk's own data path. One VbEngine runs one started device:
 * its driver's placement, over its components, with io_uring on each
 * serving thread. Servers (FUSE, NBD) reach it through vb_engine_ops. */
#pragma once

#include <glib.h>

#include "block-ops.h"
#include "driver.h"

G_BEGIN_DECLS

typedef struct _VbEngine VbEngine;

/* A component is a path (file or block device), or another block device
 * served in this process (vblk:NAME on the engine: called in place). */
typedef struct {
  const char *path;
  const VbBlockOps *ops;
  void *handle;
} VbEngineSource;

/* Called on an I/O thread when a component turns faulty; must not block. */
typedef void (*VbEngineFailureFunc) (VbEngine *engine, guint component, int error,
                                     gpointer user_data);

VbEngine *vb_engine_new (const char *name, const VbDriver *driver, GHashTable *attributes,
                         guint n_components, const VbEngineSource *sources,
                         const VbComponentInfo *infos, gboolean read_only, GError **error);
void vb_engine_free (VbEngine *engine);

void vb_engine_set_failure_func (VbEngine *engine, VbEngineFailureFunc func, gpointer user_data);

const char *vb_engine_name (VbEngine *engine);
guint vb_engine_n_components (VbEngine *engine);
gboolean vb_engine_component_faulty (VbEngine *engine, guint component);
guint64 vb_engine_component_errors (VbEngine *engine, guint component);
/* Whether every byte still has a healthy copy with @component gone too. */
gboolean vb_engine_can_lose (VbEngine *engine, guint component);
/* Marks @component faulty (SetFaulty); -EBUSY when it holds the last copy
 * of some data, -ENOTSUP without redundancy. The failure function hears
 * -ECANCELED. */
int vb_engine_set_faulty (VbEngine *engine, guint component);

extern const VbBlockOps vb_engine_ops;

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbEngine, vb_engine_free)

G_END_DECLS
