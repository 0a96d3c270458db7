"""Development runtime: DynamoDB Local, and later the stream pump and scheduler."""
