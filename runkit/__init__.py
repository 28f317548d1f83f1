"""The run kit: what every command line of ``theory/``, ``models/`` and ``benchmarks/``
shares, at the bottom of the application layer.

- :func:`progress`: the one progress bar (tqdm, to stderr), off with
  ``--no-progress`` or ``CODEDJAX_NO_PROGRESS=1``;
- :func:`add_run_arguments`: ``--out``, ``--quick``, ``--seed`` and ``--no-progress``,
  added to a parser by one call; :func:`add_config_arguments` and
  :func:`config_overrides` map the fields of a frozen config dataclass to flags;
  the parser reports a bad option in one line naming it, and its ``int`` and
  ``float`` options take integers >= 0 (:func:`count`) and finite numbers >= 0
  (:func:`nonneg_float`), its other options a non-empty value (:func:`text`), a
  comma list at least one item, ``--out`` a folder it can write (:func:`out_folder`);
  :func:`make_config` builds the config right after parsing and :func:`refuse`
  reports its errors under the flags of the fields they name; :func:`only_with`
  and :func:`not_with` refuse an option another one makes pointless;
- :func:`main`: a whole command line from its config class (the parser, the
  checks, ``Config.quick()`` under ``--quick`` by :func:`config_from_args`, the one
  place that flag is read), then the run;
- :func:`write_summary`: strict JSON (``summary.json``): NaN, inf and -inf are
  written as ``null``, never as the non-standard ``NaN``/``Infinity`` tokens;
- :func:`percentile`, :func:`max_rel_err`, :func:`l2_rel_err`: the statistics of every
  report, with one treatment of empty, infinite and NaN samples (``runkit.stats``);
- :func:`write_page`: a results page under ``docs/results/`` headed by the command,
  the commit and the date, its figures between markers (``runkit.pages``);
- :func:`check_fields`: a config's bounds and allowed values, in one call;
- :func:`md_table`, :func:`write_report`, :func:`update_report`: a report's
  tables and its ``summary.json`` and ``report.md`` (``runkit.report``);
- :func:`quiet_gc`: the heap frozen for a latency measurement on the thread
  cluster, and the collector's pauses during it counted (``runkit.gcpause``);
- :func:`environment`: the record of where a run ran (jax version, backend, devices,
  git revision, thread settings).

Imports run one way: ``codedjax`` <- ``runkit`` <- {``theory``, ``models``,
``benchmarks``}. The run kit imports the standard library, numpy, tqdm and jax (the
environment record), and codedjax (``choice``: the layout search the planner and the
regime map share), and nothing of the applications above it.
"""

from . import gcpause as gcpause
from .arguments import add_config_arguments as add_config_arguments
from .arguments import add_run_arguments as add_run_arguments
from .arguments import at_least as at_least
from .arguments import config_overrides as config_overrides
from .arguments import count as count
from .arguments import input_file as input_file
from .arguments import make_config as make_config
from .arguments import nonneg_float as nonneg_float
from .arguments import not_with as not_with
from .arguments import one_line_errors as one_line_errors
from .arguments import only_with as only_with
from .arguments import out_folder as out_folder
from .arguments import refuse as refuse
from .arguments import text as text
from .cache import CachedFn as CachedFn
from .checks import check_fields as check_fields
from .command import Invocation as Invocation
from .command import command_parser as command_parser
from .command import config_from_args as config_from_args
from .command import main as main
from .command import parse_command as parse_command
from .command import preset as preset
from .environment import environment as environment
from .gcpause import quiet_gc as quiet_gc
from .pages import write_page as write_page
from .progress import NO_PROGRESS_ENV as NO_PROGRESS_ENV
from .progress import disable_progress as disable_progress
from .progress import progress as progress
from .progress import progress_disabled as progress_disabled
from .report import md_table as md_table
from .report import update_report as update_report
from .report import write_report as write_report
from .stats import accuracy_target as accuracy_target
from .stats import l2_rel_err as l2_rel_err
from .stats import max_rel_err as max_rel_err
from .stats import percentile as percentile
from .summary import fmt as fmt
from .summary import json_clean as json_clean
from .summary import write_summary as write_summary
