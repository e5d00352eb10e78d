import pytest


@pytest.fixture(scope="session")
def spark():
    from sparkcep.spark.session import get_session

    session = get_session("local[2]", config={"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()
