"""codedjax.serving: coded inference against real (or simulated) workers.

A :class:`Server` takes a code (``codedjax.lagrange_code(...)`` and friends), a worker
function (or one per worker role, ``code.roles``), a cluster backend and a wait
policy. ``infer(x[K, ...])`` encodes the K queries into M coded rows, sends row i to
worker i, collects the answers as they arrive, decodes when the policy says so and
cancels the stragglers; ``serve`` does the same for a stream of requests with
several in flight. A :class:`PipelineServer` serves requests in rounds (layer-wise
coding: a :class:`Pipeline` of :class:`Round` objects, each a fan-out with its own
worker functions, policy and decode, and a master step between rounds).

Backends (one small interface, :class:`Backend`):

* :class:`ThreadCluster` (default): M worker threads in this process.
* :class:`SimulatedCluster`: a deterministic virtual clock, for tests and Monte Carlo.
* :class:`RayCluster`: Ray actors, for clusters of many machines (``codedjax[ray]``).

Wait policies (:class:`WaitPolicy`): :class:`FixedN`, :class:`Deadline`,
:class:`FirstDecodable`, :class:`Adaptive`. Latency and faults are injected by a
seeded :class:`Injector`: delays from one of the library's latency models
(``codedjax.ShiftedExponential``, ``codedjax.Pareto``, slow workers and racks with
``codedjax.RandomSlowdown`` and ``codedjax.PersistentSlowdown``, or
``codedjax.parse_latency(text)``), and raising, hanging, NaN and corrupted workers.
:func:`simulate_latency` computes a zero-overhead server's latencies for 1e5
requests in one vectorised pass. Architecture and measured numbers:
``docs/serving.md``.
"""

from ._arrivals import bursty_arrivals as bursty_arrivals
from ._arrivals import poisson_arrivals as poisson_arrivals
from ._backends import Backend as Backend
from ._backends import Completion as Completion
from ._backends import WorkerFunctions as WorkerFunctions
from ._deadlines import FillDeadline as FillDeadline
from ._faults import FAULT_KINDS as FAULT_KINDS
from ._faults import Injector as Injector
from ._faults import WorkerFault as WorkerFault
from ._faults import latency_shift as latency_shift
from ._load import SimulatedLoad as SimulatedLoad
from ._load import simulate_load as simulate_load
from ._open_loop import LoadRun as LoadRun
from ._open_loop import run_open_loop as run_open_loop
from ._pipeline import Pipeline as Pipeline
from ._pipeline import PipelineResult as PipelineResult
from ._pipeline import PipelineServer as PipelineServer
from ._pipeline import Round as Round
from ._policy import Adaptive as Adaptive
from ._policy import ArrivalState as ArrivalState
from ._policy import ArrivalTimes as ArrivalTimes
from ._policy import Deadline as Deadline
from ._policy import FirstDecodable as FirstDecodable
from ._policy import FixedN as FixedN
from ._policy import WaitPolicy as WaitPolicy
from ._ray import RayCluster as RayCluster
from ._serve_result import ServeResult as ServeResult
from ._server import Server as Server
from ._simulate import SimulatedLatency as SimulatedLatency
from ._simulate import simulate_latency as simulate_latency
from ._stream import QueryResult as QueryResult
from ._stream import QueueFull as QueueFull
from ._stream import StreamingServer as StreamingServer
from ._thread_cluster import ThreadCluster as ThreadCluster
from ._virtual import SimulatedCluster as SimulatedCluster
