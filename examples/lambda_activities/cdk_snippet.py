"""CDK (Python) snippet: Whimbrel plus three activity functions and their permissions.

Put this in your own stack; ``whimbrel_infra`` is this repository's ``infra/`` package.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from whimbrel_infra import Whimbrel, WhimbrelProps


class ThumbnailsStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)
        engine = Whimbrel(self, "Whimbrel", props=WhimbrelProps(table_prefix="thumbs_"))

        code = lambda_.Code.from_asset("examples/lambda_activities")  # bundle whimbrel too
        functions = []
        for name, handler in (("validate", "handlers.validate"),
                              ("render", "handlers.render"),
                              ("index", "handlers.index")):
            fn = lambda_.Function(
                self, f"{name.title()}Fn",
                function_name=f"whimbrel-example-{name}",
                runtime=lambda_.Runtime.PYTHON_3_12,
                handler=handler,
                code=code,
                timeout=Duration.minutes(5),
                environment={"WHIMBREL_TABLE_PREFIX": "thumbs_"},
            )
            # Read its activity, heartbeat, report its end (and run follow-ups).
            engine.grant_full_logic_client(fn)
            # The engine (stream handlers, sweeper) invokes the function as the launcher.
            for engine_fn in engine.functions.values():
                fn.grant_invoke(engine_fn)
            functions.append(fn)
        # An activity's end runs its follow-ups in its own function, which launches the
        # next activities (validate -> the renders -> index; a retry of itself).
        for fn in functions:
            for other in functions:
                other.grant_invoke(fn)
