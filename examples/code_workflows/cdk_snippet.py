"""CDK (Python) snippet: Whimbrel deployed with this folder's code workflows, so its
Lambdas make their decisions (docs/deploy.md, "Your code workflows on the Lambdas").

Put this in your own stack; ``whimbrel_infra`` is this repository's ``infra/`` package.
The functions import ``workflows`` at cold start and register ``poll_job``, ``trip`` and
``shop_order``; a ``workflow_request`` row (``whimbrel submit trip --simple …``) starts
one. Their steps are python functions (``shop_steps``), which a Lambda never runs: a
worker runs them, wherever it can run for long (ECS, EC2, a laptop). Give it the
workflows' module too, so that a step's end it records is followed by the run's next
decision right there (a process that is no worker for them leaves it for the heartbeat
function's next tick)::

    cd examples/code_workflows
    WHIMBREL_TABLE_PREFIX=shop_ whimbrel worker --module shop_steps --module workflows
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Stack
from constructs import Construct
from whimbrel_infra import Whimbrel, WhimbrelProps

HERE = Path(__file__).resolve().parent


class ShopStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.engine = Whimbrel(self, "Whimbrel", props=WhimbrelProps(
            table_prefix="shop_",
            workflow_code=HERE,                 # bundled at the functions' code root
            workflow_modules=["workflows"],     # their @workflows: the Lambdas decide
        ))
