"""Chapter 12 (circuits: induction heads): its exercise checks (``check``) and its
static twin (``twins``)."""
