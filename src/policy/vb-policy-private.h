/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Inside the policy library: the match conditions of a rule, shared by the
 * rule-file parser (vb-policy-parse.c) and evaluation (vb-policy.c), and the
 * duration syntax both read and write. */
#pragma once

#include "vb-policy.h"
#include "vb-size.h"

G_BEGIN_DECLS

typedef enum {
  VB_MATCH_PROPERTY, /* match.PROPERTY=GLOB */
  VB_MATCH_SIZE,     /* match.size=OP SIZE */
  VB_MATCH_METADATA, /* match.metadata=vblk|none|unknown|any */
  VB_MATCH_UUID,     /* match.uuid=GLOB */
  VB_MATCH_DEVICE,   /* match.device=GLOB */
} VbMatchKind;

typedef enum {
  VB_SIZE_LT,
  VB_SIZE_LE,
  VB_SIZE_GT,
  VB_SIZE_GE,
  VB_SIZE_EQ,
} VbSizeOp;

typedef struct {
  VbMatchKind kind;
  guint line;
  char *property;     /* VB_MATCH_PROPERTY: the udev property name */
  char *pattern;      /* glob or metadata kind, as written (trimmed) */
  GPatternSpec *spec; /* the compiled glob (PROPERTY, UUID, DEVICE) */
  VbSizeOp op;        /* VB_MATCH_SIZE */
  guint64 size;
} VbPolicyMatch;

/* The error when our scan of a rule file and GKeyFile's disagree on a line
 * (a bug: the fuzz target checks it never happens). */
#define VB_POLICY_NOT_UNDERSTOOD "not understood (GKeyFile reads this line differently)"

void vb_policy_match_free (VbPolicyMatch *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbPolicyMatch, vb_policy_match_free)
VbPolicyRule *vb_policy_rule_new (const char *name, const char *file, guint line);
void vb_policy_rule_free (VbPolicyRule *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbPolicyRule, vb_policy_rule_free)

/* A policy owning @rules (VbPolicyRule*, freed with it). */
VbPolicy *vb_policy_new_take (GPtrArray *rules);

/* "assemble" -> VB_POLICY_ASSEMBLE ...; FALSE for anything else. */
gboolean vb_policy_action_from_string (const char *text, VbPolicyAction *out);

/* Sizes are read and written with vb_size_parse and vb_size_format
 * (vb-size.h), as driver attributes are. "<=" ... */
const char *vb_policy_size_op_to_string (VbSizeOp op);

/* "500ms", "30s", "2m", "1h", "0", "never" (the last two: 0). */
gboolean vb_policy_parse_duration (const char *text, guint64 *ms);
/* The largest unit that divides @ms exactly ("2m", "1500ms"); 0 -> "never". */
char *vb_policy_format_duration (guint64 ms);

G_END_DECLS
